package main

import (
	"context"
	"errors"
	"flag"
	"io"
)

func backfillFlags(fs *flag.FlagSet) {}

// runBackfill reads every user from Clerk's Backend API and applies it.
func runBackfill(ctx context.Context, cfg config, out io.Writer) error {
	return errors.New("backfill: not implemented yet")
}
