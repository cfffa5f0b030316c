package probe

import "testing"

// TestEveryProgramExists checks the point table against the BPF objects:
// every program a method names is in its point's object, and every site
// handler has its enabling constant in the sites object.
func TestEveryProgramExists(t *testing.T) {
	sitesSpec, err := loadSites()
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range sites {
		if sitesSpec.Programs[s.program] == nil {
			t.Errorf("site %s: no program %s in sites.bpf.c", name, s.program)
		}
	}
	for _, p := range points {
		spec, err := p.load()
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		for _, m := range p.methods {
			for _, prog := range m.programs {
				switch {
				case prog.site != "":
					if _, ok := sites[prog.site]; !ok {
						t.Errorf("%s/%s: %s names unknown site %q", p.name, m.method, prog.name, prog.site)
					}
					if _, ok := sitesSpec.Variables["on_"+prog.name]; !ok {
						t.Errorf("%s/%s: sites.bpf.c has no on_%s", p.name, m.method, prog.name)
					}
				case spec.Programs[prog.name] == nil:
					t.Errorf("%s/%s: no program %s in the point's object", p.name, m.method, prog.name)
				}
			}
		}
	}
}
