package api

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenAPI_TheTypeScriptClientsTypesAreGeneratedFromThisDocument: the
// TypeScript client's committed types (clients/typescript/src/schema.ts)
// are openapi-typescript's output for this very document, not edited
// since. Its generator writes the SHA-256 of both beside them
// (schema.sha256): a change of the document fails here, without Node,
// until the types are generated again.
func TestOpenAPI_TheTypeScriptClientsTypesAreGeneratedFromThisDocument(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("..", "clients", "typescript", "src")
	sums, err := os.ReadFile(filepath.Join(dir, "schema.sha256"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		sum, name, _ := strings.Cut(line, "  ")
		want[name] = sum
	}
	schema, err := os.ReadFile(filepath.Join(dir, "schema.ts"))
	if err != nil {
		t.Fatal(err)
	}
	regenerate := "run `npm ci && npm run generate` in clients/typescript (Node 20 or newer), and commit src/schema.ts and src/schema.sha256"
	if got := fmt.Sprintf("%x", sha256.Sum256(openAPI)); got != want["api/openapi.json"] {
		t.Errorf("api/openapi.json is not the document clients/typescript/src/schema.ts was generated from: %s", regenerate)
	}
	if got := fmt.Sprintf("%x", sha256.Sum256(schema)); got != want["clients/typescript/src/schema.ts"] {
		t.Errorf("clients/typescript/src/schema.ts is not what its generator wrote (it is never edited by hand): %s", regenerate)
	}
}
