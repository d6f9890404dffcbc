package mongotest

import "testing"

func TestWithOption_MergesIntoTheQuery(t *testing.T) {
	for _, tc := range []struct{ uri, want string }{
		{"mongodb://localhost:27017", "mongodb://localhost:27017/?w=1"},
		{"mongodb://localhost:27017/", "mongodb://localhost:27017/?w=1"},
		{"mongodb://localhost:27017/?directConnection=true", "mongodb://localhost:27017/?directConnection=true&w=1"},
		{"mongodb://u:p@a:1,b:2/admin?replicaSet=rs&w=majority", "mongodb://u:p@a:1,b:2/admin?replicaSet=rs&w=1"},
		{"mongodb+srv://cluster.example.net/?retryWrites=false&W=2", "mongodb+srv://cluster.example.net/?retryWrites=false&w=1"},
	} {
		if got := WithOption(tc.uri, "w", "1"); got != tc.want {
			t.Errorf("WithOption(%q, w, 1) = %q, want %q", tc.uri, got, tc.want)
		}
	}
}

func TestHasOption(t *testing.T) {
	for _, tc := range []struct {
		uri  string
		want bool
	}{
		{"mongodb://h/", false},
		{"mongodb://h/?retryWrites=false", false},
		{"mongodb://h/?retryWrites=false&W=majority", true},
		{"mongodb://h/?w=1", true},
	} {
		if got := HasOption(tc.uri, "w"); got != tc.want {
			t.Errorf("HasOption(%q, w) = %t, want %t", tc.uri, got, tc.want)
		}
	}
}
