package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestClient_ImportsOnlyTheStandardLibrary: an application that imports
// the client pulls in none of the service's dependencies (Echo, the
// MongoDB driver, SQLite…), nor any other module.
func TestClient_ImportsOnlyTheStandardLibrary(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, standard, _ := strings.Cut(line, " ")
		if standard != "true" && pkg != "github.com/usersync/usersync/client" {
			t.Errorf("the client imports %s", pkg)
		}
		n++
	}
	if n < 10 {
		t.Errorf("go list -deps listed %d packages: %s", n, out)
	}
}
