package pacerprom_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/llmpacer/llmpacer/pacerprom"
	"github.com/prometheus/client_golang/prometheus"
)

// docs/operations.md names only metrics the collector exports (in its
// table and its alert rules), and its table lists every one of them.
// promtool checks the rules' syntax; this checks their names.
func TestOperationsDocNamesTheMetrics(t *testing.T) {
	doc, err := os.ReadFile("../docs/operations.md")
	must(t, err)
	described := map[string]bool{}
	ch := make(chan *prometheus.Desc)
	go func() {
		pacerprom.New().Describe(ch)
		close(ch)
	}()
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range ch {
		described[fqName.FindStringSubmatch(d.String())[1]] = true
	}

	for _, name := range regexp.MustCompile(`llmpacer_[a-z_]+`).FindAllString(string(doc), -1) {
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suffix); ok && described[b] {
				base = b
			}
		}
		if !described[base] {
			t.Errorf("docs/operations.md names %s; the collector exports no such metric", name)
		}
	}
	for name := range described {
		if !strings.Contains(string(doc), "| `"+name+"` |") {
			t.Errorf("docs/operations.md's table does not list %s", name)
		}
	}
}
