package models_test

import (
	"testing"
	"time"

	"github.com/usersync/usersync/models"
)

// BenchmarkDecode_SessionBesideAUserUpdate decodes a session.created and
// a user.updated as the webhook does (envelope, then the change): a
// session's decode reads its embedded user as a user event's does.
func BenchmarkDecode_SessionBesideAUserUpdate(b *testing.B) {
	now := time.UnixMilli(1716883200000).Add(time.Hour)
	for _, name := range []string{"session.created.json", "user.updated.json"} {
		body := fixture(b, name)
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				ev, err := models.DecodeEvent(body)
				if err == nil {
					_, err = ev.Decode("msg_1", now)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
