package output

import (
	"testing"

	"github.com/nettrace-dev/nettrace/pkg/event"
)

// Every point has a view: a new point without one fails here.
func TestEveryPointHasAView(t *testing.T) {
	for _, p := range event.Points {
		if int(p) >= len(views) || views[p] == nil {
			t.Errorf("point %s has no view", p)
		}
	}
}
