// Command sendevent signs a Clerk webhook payload with a Svix secret and
// posts it to a running usersync, as Clerk would.
//
//	go run ./scripts/sendevent [-url URL] [-secret whsec_...] [-id msg_...] FILE
//
// The secret defaults to $CLERK_WEBHOOK_SECRET, else
// $CLERK_WEBHOOK_SIGNING_SECRET (Clerk's name, which usersync reads too),
// each the first of several separated by spaces, else the one usersync
// generated in ./data/secrets.json. The URL defaults to the webhook of the
// usersync the environment configures: USERSYNC_WEBHOOK_ADDR, else
// USERSYNC_ADDR, else :8080, on localhost. Send the same -id twice to see a
// duplicate delivery.
package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	svix "github.com/svix/svix-webhooks/go"
)

func main() {
	url := flag.String("url", envURL(os.Getenv), "webhook endpoint")
	secret := flag.String("secret", envSecret(os.Getenv), "signing secret (whsec_...)")
	dataDir := flag.String("data-dir", "./data", "where usersync keeps generated secrets")
	id := flag.String("id", "", "svix-id (default: a new one)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: sendevent [-url URL] [-secret whsec_...] [-id msg_...] FILE")
		os.Exit(2)
	}
	if err := send(*url, *secret, *dataDir, *id, flag.Arg(0)); err != nil {
		fmt.Fprintln(os.Stderr, "sendevent:", err)
		os.Exit(1)
	}
}

// envSecret is the secret the environment gives usersync, as usersync
// reads it: CLERK_WEBHOOK_SECRET, else CLERK_WEBHOOK_SIGNING_SECRET; of
// several (a rotation), the first.
func envSecret(getenv func(string) string) string {
	for _, name := range []string{"CLERK_WEBHOOK_SECRET", "CLERK_WEBHOOK_SIGNING_SECRET"} {
		if f := strings.Fields(getenv(name)); len(f) > 0 {
			return f[0]
		}
	}
	return ""
}

// envURL is the webhook URL of the usersync the environment configures,
// as usersync reads its addresses: USERSYNC_WEBHOOK_ADDR (the webhook's
// own listener), else USERSYNC_ADDR, else :8080; an address on every
// interface is reached on localhost.
func envURL(getenv func(string) string) string {
	addr := ":8080"
	for _, name := range []string{"USERSYNC_WEBHOOK_ADDR", "USERSYNC_ADDR"} {
		if a := strings.TrimSpace(getenv(name)); a != "" {
			addr = a
			break
		}
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		host, port = "localhost", "8080"
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port) + "/webhooks/clerk"
}

func send(url, secret, dataDir, id, file string) error {
	body, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if secret == "" {
		b, err := os.ReadFile(filepath.Join(dataDir, "secrets.json"))
		if err != nil {
			return fmt.Errorf("no -secret, CLERK_WEBHOOK_SECRET or CLERK_WEBHOOK_SIGNING_SECRET, and %w", err)
		}
		var s struct{ WebhookSecret string }
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		if secret = s.WebhookSecret; secret == "" {
			return fmt.Errorf("no -secret, CLERK_WEBHOOK_SECRET or CLERK_WEBHOOK_SIGNING_SECRET, and %s holds no generated webhook secret",
				filepath.Join(dataDir, "secrets.json"))
		}
	}
	if id == "" {
		b := make([]byte, 12)
		_, _ = rand.Read(b)
		id = "msg_" + hex.EncodeToString(b)
	}
	wh, err := svix.NewWebhook(secret)
	if err != nil {
		return fmt.Errorf("secret: %w", err)
	}
	now := time.Now()
	sig, err := wh.Sign(id, now, body)
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("svix-id", id)
	req.Header.Set("svix-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("svix-signature", sig)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	fmt.Printf("%s %s\n%s\n", resp.Status, id, bytes.TrimSpace(out))
	if resp.StatusCode >= 300 {
		os.Exit(1)
	}
	return nil
}
