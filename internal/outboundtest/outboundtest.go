// Package outboundtest reads the Clerk deliveries after which usersync
// has sent an outbound message of every type (testdata/outbound): the
// tests of the OpenAPI document's webhooks and of the clients deliver
// them, in order, to a usersync with an endpoint, and check what arrives.
package outboundtest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Step is one Clerk delivery and the outbound messages it makes.
type Step struct {
	// What the delivery is, for a failure's message.
	What string
	// Body is the Clerk event, as Svix delivers it (unsigned).
	Body []byte
	// Types are the outbound types of the messages an endpoint that
	// wants every type receives once the delivery has applied, in no
	// particular order.
	Types []string
}

// file is testdata/outbound/steps.json.
type file struct {
	Steps []struct {
		What string `json:"what"`
		// Fixture names a file of models/testdata; Patch, a JSON merge
		// patch (RFC 7396), changes it. Body is the event itself instead.
		Fixture string          `json:"fixture"`
		Patch   json.RawMessage `json:"patch"`
		Body    json.RawMessage `json:"body"`
		Types   []string        `json:"types"`
	} `json:"steps"`
}

// Steps reads the steps, root being the repository's root.
func Steps(root string) ([]Step, error) {
	b, err := os.ReadFile(filepath.Join(root, "testdata", "outbound", "steps.json"))
	if err != nil {
		return nil, err
	}
	var f file
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("testdata/outbound/steps.json: %w", err)
	}
	steps := make([]Step, 0, len(f.Steps))
	for _, s := range f.Steps {
		body := []byte(s.Body)
		if s.Fixture != "" {
			if body, err = os.ReadFile(filepath.Join(root, "models", "testdata", filepath.FromSlash(s.Fixture))); err != nil {
				return nil, err
			}
		}
		if len(s.Patch) > 0 {
			if body, err = mergePatch(body, s.Patch); err != nil {
				return nil, fmt.Errorf("step %q: %w", s.What, err)
			}
		}
		if len(body) == 0 || len(s.Types) == 0 {
			return nil, fmt.Errorf("step %q: a fixture or a body, and the types it makes, are required", s.What)
		}
		steps = append(steps, Step{What: s.What, Body: body, Types: s.Types})
	}
	return steps, nil
}

// mergePatch applies the JSON merge patch patch to doc (RFC 7396).
func mergePatch(doc, patch []byte) ([]byte, error) {
	var d, p any
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, err
	}
	return json.Marshal(merge(d, p))
}

func merge(doc, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	dm, ok := doc.(map[string]any)
	if !ok {
		dm = map[string]any{}
	}
	for k, v := range pm {
		if v == nil {
			delete(dm, k)
		} else {
			dm[k] = merge(dm[k], v)
		}
	}
	return dm
}
