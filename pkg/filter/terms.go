package filter

import "fmt"

// Term is one primitive of a program, or its negation.
type Term struct {
	Insn
	Not bool
}

// Alternatives returns the program in disjunctive normal form: it matches
// a tuple when every term of one of the alternatives does. Rule languages
// without a general "or" (nftables: one rule per alternative) evaluate it
// so. The empty program is one empty alternative; an error says when the
// form would need more than max alternatives.
func (p *Program) Alternatives(max int) ([][]Term, error) {
	var stack [][][]Term
	for _, in := range p.Insns {
		var r [][]Term
		switch in.Op {
		case OpAnd, OpOr:
			a, b := stack[len(stack)-2], stack[len(stack)-1]
			stack = stack[:len(stack)-2]
			if in.Op == OpOr {
				r = append(append([][]Term{}, a...), b...)
			} else {
				r = cross(a, b)
			}
		case OpNot:
			r = negate(stack[len(stack)-1])
			stack = stack[:len(stack)-1]
		default:
			r = [][]Term{{{Insn: in}}}
		}
		if len(r) > max {
			return nil, fmt.Errorf("filter %q needs more than %d alternatives in normal form", p.Expr, max)
		}
		stack = append(stack, r)
	}
	if len(stack) == 0 {
		return [][]Term{{}}, nil
	}
	return stack[0], nil
}

// cross is the conjunction of two normal forms: every pair of their
// alternatives.
func cross(a, b [][]Term) [][]Term {
	out := make([][]Term, 0, len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			out = append(out, append(append([]Term{}, x...), y...))
		}
	}
	return out
}

// negate is the normal form of not(a): by De Morgan, every choice of one
// negated term from each alternative.
func negate(a [][]Term) [][]Term {
	out := [][]Term{{}}
	for _, alt := range a {
		var choices [][]Term
		for _, t := range alt {
			t.Not = !t.Not
			choices = append(choices, []Term{t})
		}
		out = cross(out, choices)
	}
	return out
}
