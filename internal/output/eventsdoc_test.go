package output

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nettrace-dev/nettrace/pkg/event"
)

// eventsDoc is the JSON schema's documentation.
const eventsDoc = "../../docs/events.md"

// docTable is one table of docs/events.md: each row's field names (the
// backquoted names in its first column, a nested one as a path) and its
// meaning.
type docTable map[string]string

// backquoted matches a field name in a table's first column: a key, a list
// (`packets[]`) or a nested one (`packets[].steps[]`, read packets.steps).
var backquoted = regexp.MustCompile("`([a-z_.\\[\\]]+)`")

// docTables reads the tables of the document's sections, keyed by the
// heading or the line that introduces each.
func docTables(t *testing.T) map[string]docTable {
	t.Helper()
	b, err := os.ReadFile(eventsDoc)
	if err != nil {
		t.Fatal(err)
	}
	tables := map[string]docTable{}
	var title string
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "| `") {
			if strings.HasPrefix(line, "## ") || strings.HasPrefix(line, "Each ") {
				title = line
			}
			continue
		}
		cells := strings.Split(line, " | ")
		if tables[title] == nil {
			tables[title] = docTable{}
		}
		for _, m := range backquoted.FindAllStringSubmatch(cells[0], -1) {
			tables[title][strings.ReplaceAll(m[1], "[]", "")] = strings.Join(cells[1:], " | ")
		}
	}
	return tables
}

// jsonNames are the JSON object keys of a struct type.
func jsonNames(typ reflect.Type) []string {
	var names []string
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" && name != "type" {
			names = append(names, name)
		}
	}
	return names
}

// The documentation of the JSON objects names every field they have and
// no field they lack: each table's rows are its struct's keys, and the
// nested objects' keys are named in their row.
func TestEventsDocMatchesTheJSONObjects(t *testing.T) {
	tables := docTables(t)
	objects := []struct {
		table string
		typ   reflect.Type
	}{
		{"## `{\"type\":\"event\"}`", reflect.TypeFor[JSONEvent]()},
		{"## `{\"type\":\"flow\"}`", reflect.TypeFor[JSONFlow]()},
		{"## `{\"type\":\"explanation\"}`", reflect.TypeFor[JSONExplanation]()},
		{"Each `netfilter_rules[]` object:", reflect.TypeFor[JSONNetfilterRule]()},
	}
	for _, o := range objects {
		rows := tables[o.table]
		if len(rows) == 0 {
			t.Errorf("%s: no table in %s", o.table, eventsDoc)
			continue
		}
		keys := jsonNames(o.typ)
		for _, k := range keys {
			if _, ok := rows[k]; !ok {
				t.Errorf("%s: %s's field %q is not documented", o.table, o.typ.Name(), k)
			}
		}
		for k := range rows {
			if !strings.Contains(k, ".") && !slices.Contains(keys, k) {
				t.Errorf("%s: documents %q, which %s does not have", o.table, k, o.typ.Name())
			}
		}
	}
	nested := []struct {
		table, row string
		typ        reflect.Type
	}{
		{"## `{\"type\":\"event\"}`", "ct", reflect.TypeFor[JSONConntrack]()},
		{"## `{\"type\":\"flow\"}`", "packets", reflect.TypeFor[JSONPacket]()},
		{"## `{\"type\":\"flow\"}`", "packets.steps", reflect.TypeFor[JSONStep]()},
		{"## `{\"type\":\"explanation\"}`", "evidence", reflect.TypeFor[JSONEvidence]()},
		{"## `{\"type\":\"explanation\"}`", "service", reflect.TypeFor[JSONService]()},
	}
	for _, p := range event.Points {
		// Each point's payload, from its view.
		if v := event.ViewOf(p); v.JSONKey() != "" {
			nested = append(nested, struct {
				table, row string
				typ        reflect.Type
			}{"## `{\"type\":\"event\"}`", v.JSONKey(), reflect.TypeOf(v.JSONSchema()).Elem()})
		}
	}
	for _, n := range nested {
		meaning, ok := tables[n.table][n.row]
		if !ok {
			t.Errorf("%s: no row %q", n.table, n.row)
			continue
		}
		for _, k := range jsonNames(n.typ) {
			if !strings.Contains(meaning, "`"+k+"`") {
				t.Errorf("%s, row %q: %s's field %q is not named", n.table, n.row, n.typ.Name(), k)
			}
		}
	}
}

// The event object's schema has each point's payload, under the key its
// view writes it with and of its view's type: a point added without its
// field in JSONEvent fails here.
func TestJSONEventHasEveryPayload(t *testing.T) {
	fields := map[string]reflect.Type{}
	typ := reflect.TypeFor[JSONEvent]()
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		fields[name] = typ.Field(i).Type
	}
	for _, p := range event.Points {
		v := event.ViewOf(p)
		if v.JSONKey() == "" {
			if v.JSONSchema() != nil {
				t.Errorf("point %s has a payload schema but no key", p)
			}
			continue
		}
		want := reflect.TypeOf(v.JSONSchema())
		if got, ok := fields[v.JSONKey()]; !ok || got != want {
			t.Errorf("point %s: JSONEvent's field %q is %v, want %v", p, v.JSONKey(), got, want)
		}
	}
}

// The documented tuple example has every key a tuple has.
func TestEventsDocShowsATuple(t *testing.T) {
	b, err := os.ReadFile(eventsDoc)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "A tuple is `")
	example, _, _ := strings.Cut(rest, "`")
	if !ok {
		t.Fatalf("%s shows no tuple", eventsDoc)
	}
	for _, k := range jsonNames(reflect.TypeFor[JSONTuple]()) {
		if !strings.Contains(example, `"`+k+`"`) {
			t.Errorf("the tuple example %s lacks %q", example, k)
		}
	}
}
