// Command engine runs usersync's embedded database engine (FerretDB with
// SQLite files) on its own, as an external MongoDB-compatible server: for
// fault runs that stop and restart the database under a running usersync.
//
//	go run ./scripts/engine -addr 127.0.0.1:27018 -dir ./data/engine
//
// Point usersync at it with MONGODB_URI=mongodb://127.0.0.1:27018/. It
// stops on SIGINT or SIGTERM. Loopback addresses only.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	repository "github.com/usersync/usersync/repository/mongo"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:27018", "listen address (loopback)")
	dir := flag.String("dir", "./data/engine", "directory of the SQLite files")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	e, err := repository.StartEmbedded(*dir, *addr, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "engine:", err)
		os.Exit(1)
	}
	fmt.Println("engine: listening on", e.URI())
	<-ctx.Done()
	e.Stop()
}
