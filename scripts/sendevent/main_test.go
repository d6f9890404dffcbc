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

// TestEnvURL_PostsToTheUsersyncTheEnvironmentConfigures: sendevent's
// default URL is the webhook's listener usersync would serve on, with the
// same variables.
func TestEnvURL_PostsToTheUsersyncTheEnvironmentConfigures(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{}, "http://localhost:8080/webhooks/clerk"},
		{map[string]string{"USERSYNC_ADDR": ":8081"}, "http://localhost:8081/webhooks/clerk"},
		{map[string]string{"USERSYNC_ADDR": "127.0.0.1:9001"}, "http://127.0.0.1:9001/webhooks/clerk"},
		{map[string]string{"USERSYNC_ADDR": "[::]:9002"}, "http://localhost:9002/webhooks/clerk"},
		{map[string]string{"USERSYNC_ADDR": ":8080", "USERSYNC_WEBHOOK_ADDR": "127.0.0.1:9003"}, "http://127.0.0.1:9003/webhooks/clerk"},
	} {
		if got := envURL(func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("envURL(%v) = %q, want %q", tc.env, got, tc.want)
		}
	}
}
