package main

import "testing"

// TestEnvSecret_ReadsTheVariablesUsersyncReads: sendevent signs with the
// secret usersync verifies with, under either of its names.
func TestEnvSecret_ReadsTheVariablesUsersyncReads(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"CLERK_WEBHOOK_SECRET": "whsec_a"}, "whsec_a"},
		{map[string]string{"CLERK_WEBHOOK_SIGNING_SECRET": "whsec_b"}, "whsec_b"},
		{map[string]string{"CLERK_WEBHOOK_SIGNING_SECRET": " whsec_new whsec_old"}, "whsec_new"},
		{map[string]string{"CLERK_WEBHOOK_SECRET": "whsec_a", "CLERK_WEBHOOK_SIGNING_SECRET": "whsec_a"}, "whsec_a"},
		{map[string]string{}, ""},
	} {
		if got := envSecret(func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("envSecret(%v) = %q, want %q", tc.env, got, tc.want)
		}
	}
}
