package test

import (
	"os"
	"regexp"
	"testing"
)

// The guests' busy suites (scripts/vmtest/run.sh) name the IPv4 incidents
// one by one, to share them between the two guests so that both end about
// together: a new incident missing from both lists would never run under
// a guest's kernel, and nothing else would say so. Each incident must be
// in exactly one busy suite.
func TestGuestBusySuitesHoldEveryIncident(t *testing.T) {
	script, err := os.ReadFile("../scripts/vmtest/run.sh")
	if err != nil {
		t.Fatal(err)
	}
	suites := regexp.MustCompile(`\[(busy-[a-z0-9-]+)\]='\^TestBusyLab\$/([^/']+)/unfiltered`).FindAllSubmatch(script, -1)
	if len(suites) < 3 {
		t.Fatalf("found %d busy suites in run.sh, want the IPv4 ones and busy-v6", len(suites))
	}
	for _, c := range scenarioChecks {
		var in []string
		for _, s := range suites {
			if regexp.MustCompile(string(s[2])).MatchString(c.scenario) {
				in = append(in, string(s[1]))
			}
		}
		if len(in) != 1 {
			t.Errorf("incident %s is in the guests' busy suites %v, want exactly one", c.scenario, in)
		}
	}
}
