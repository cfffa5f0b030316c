package engine

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// docs/events.md names every key of the summary object, in its bullet.
func TestEventsDocNamesTheSummary(t *testing.T) {
	b, err := os.ReadFile("../../docs/events.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "- `summary`:")
	bullet, _, _ := strings.Cut(rest, "\n\n")
	if !ok {
		t.Fatal("docs/events.md has no summary bullet")
	}
	typ := reflect.TypeFor[jsonSummary]()
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		if name != "type" && !strings.Contains(bullet, "`"+name+"`") {
			t.Errorf("the summary's %q is not documented", name)
		}
	}
}
