package main

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/repository/repotest"
)

func TestServe_ShutdownEndsInTimeAndExits0WithASlowClient(t *testing.T) {
	t.Parallel()
	if repotest.UsesMongoDB() {
		t.Skip("runs the embedded engine")
	}
	if readTimeout > shutdownTimeout {
		t.Fatalf("readTimeout %v exceeds the shutdown budget %v", readTimeout, shutdownTimeout)
	}
	// A budget well under readTimeout: only closing the connection ends it.
	base, out, stop := startSeams(t, map[string]string{"USERSYNC_ADDR": "127.0.0.1:0", "USERSYNC_DATA_DIR": repotest.DataDir(t)},
		seams{shutdownTimeout: time.Second})
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := fmt.Fprint(conn, "POST /webhooks/clerk HTTP/1.1\r\nHost: usersync\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}
	trickled := make(chan struct{})
	go func() { // one byte a second, as a slowloris client sends
		defer close(trickled)
		for {
			time.Sleep(time.Second)
			if _, err := conn.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	time.Sleep(500 * time.Millisecond) // let the server start reading the body

	done := make(chan error, 1)
	go func() { done <- stop() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run returned %v with a slow client connected, want nil (exit 0)\n%s", err, out)
		}
	case <-time.After(25 * time.Second):
		t.Fatalf("run did not return within 25 s of SIGTERM with a 1 s shutdown budget\n%s", out)
	}
	if !strings.Contains(out.String(), `"msg":"stopped"`) {
		t.Errorf("no \"stopped\" line:\n%s", out)
	}
	conn.Close()
	<-trickled
}
