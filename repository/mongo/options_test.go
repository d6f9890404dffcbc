package mongo_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/mongo"
)

// TestClientOptions_WhatTheURISetsWins builds the driver's options for
// URIs that set each option usersync has a default for, without a
// server: the URI's value stands, and the default fills only what the URI
// leaves unset.
func TestClientOptions_WhatTheURISetsWins(t *testing.T) {
	const base = "mongodb://db.example.net:27017/"
	o := mongo.Options{ServerSelectionTimeout: 2 * time.Second, OperationTimeout: 10 * time.Second}
	// opts is what a test compares: a bool pointer as "unset", "true" or
	// "false"; a read preference nil is the driver's primary.
	type opts struct {
		W, Journal, RetryWrites, ReadPref, AppName string
		Timeout, ServerSelection, Connect          time.Duration
	}
	defaults := opts{W: "majority", Journal: "unset", RetryWrites: "unset", ReadPref: "primary", AppName: "usersync",
		Timeout: 10 * time.Second, ServerSelection: 2 * time.Second, Connect: 2 * time.Second}
	with := func(f func(*opts)) opts { g := defaults; f(&g); return g }
	for _, tc := range []struct {
		query string
		want  opts
	}{
		{"", defaults},
		{"?w=1", with(func(g *opts) { g.W = "1" })},
		{"?w=2", with(func(g *opts) { g.W = "2" })},
		{"?w=majority&journal=false", with(func(g *opts) { g.Journal = "false" })},
		{"?journal=true", with(func(g *opts) { g.Journal = "true" })}, // w: still a majority
		{"?retryWrites=false", with(func(g *opts) { g.RetryWrites = "false" })},
		{"?readPreference=secondaryPreferred", with(func(g *opts) { g.ReadPref = "secondaryPreferred" })},
		{"?timeoutMS=2500", with(func(g *opts) { g.Timeout = 2500 * time.Millisecond })},
		{"?timeoutMS=0", with(func(g *opts) { g.Timeout = 0 })},
		{"?serverSelectionTimeoutMS=30000", with(func(g *opts) { g.ServerSelection = 30 * time.Second })},
		{"?connectTimeoutMS=700", with(func(g *opts) { g.Connect = 700 * time.Millisecond })},
		{"?appName=billing-usersync", with(func(g *opts) { g.AppName = "billing-usersync" })},
		// As Amazon DocumentDB's console gives it.
		{"?tls=true&replicaSet=rs0&readPreference=secondaryPreferred&retryWrites=false", with(func(g *opts) {
			g.ReadPref, g.RetryWrites = "secondaryPreferred", "false"
		})},
	} {
		t.Run(tc.query, func(t *testing.T) {
			co, err := mongo.ClientOptionsForTest(base+tc.query, o)
			if err != nil {
				t.Fatal(err)
			}
			b := func(p *bool) string {
				if p == nil {
					return "unset"
				}
				return fmt.Sprint(*p)
			}
			d := func(p *time.Duration) time.Duration {
				if p == nil {
					return -1
				}
				return *p
			}
			got := opts{W: fmt.Sprint(co.WriteConcern.W), Journal: b(co.WriteConcern.Journal), RetryWrites: b(co.RetryWrites),
				ReadPref: "primary", Timeout: d(co.Timeout), ServerSelection: d(co.ServerSelectionTimeout), Connect: d(co.ConnectTimeout)}
			if co.ReadPreference != nil {
				got.ReadPref = co.ReadPreference.Mode().String()
			}
			if co.AppName != nil {
				got.AppName = *co.AppName
			}
			if got != tc.want {
				t.Errorf("options of %q:\n got  %+v\n want %+v", tc.query, got, tc.want)
			}
		})
	}
}

// TestOpen_RefusesUnacknowledgedWritesAndNamesNoPassword opens stores on
// URIs it must refuse, without a server: one asking for unacknowledged
// writes, and malformed ones, whose error must not print the password.
func TestOpen_RefusesUnacknowledgedWritesAndNamesNoPassword(t *testing.T) {
	for _, uri := range []string{
		"mongodb://app:s3cret@db.example.net/?w=0",
		"mongodb://app:s3cret@db.example.net:notaport/",
		"mongodb://app:s3cret@db.example.net/?timeoutMS=soon",
		"postgres://app:s3cret@db.example.net/",
	} {
		_, err := mongo.Open(context.Background(), uri, "usersync", mongo.Options{})
		if !errors.Is(err, models.ErrInvalid) {
			t.Errorf("Open(%q) = %v, want ErrInvalid", uri, err)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q): error %q shows the password", uri, err)
		}
	}
	s, err := mongo.Open(context.Background(), "mongodb://app:s3cret@127.0.0.1:1/?w=1", "usersync", mongo.Options{})
	if err != nil {
		t.Fatalf("Open with w=1: %v", err)
	}
	_ = s.Close(context.Background())
}
