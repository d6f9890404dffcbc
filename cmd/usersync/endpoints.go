package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"regexp"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/outbound"
	"github.com/usersync/usersync/repository"
)

// The endpoints of outbound webhooks from configuration
// (USERSYNC_ENDPOINTS_FILE): read and checked before the store is opened,
// then written to the store as endpoints cfg_<name>, read-only through the
// API. The file is the truth at each start: an endpoint no longer in it
// is deleted, and each is enabled or not as the file says (a restart
// enables again one usersync disabled; set "enabled": false to keep it
// off).

// maxEndpointsFile bounds the file's size.
const maxEndpointsFile = 1 << 20

var endpointName = regexp.MustCompile(`^[a-z0-9_-]{1,40}$`)

type endpointsFile struct {
	Endpoints []struct {
		Name        string   `json:"name"`
		URL         string   `json:"url"`
		Secret      string   `json:"secret"`
		EventTypes  []string `json:"eventTypes"`
		Description string   `json:"description"`
		Enabled     *bool    `json:"enabled"`
	} `json:"endpoints"`
}

// readEndpointsFile reads and checks the endpoints of cfg's file; none
// without one. Its errors name the setting and the endpoint at fault, and
// never a secret.
func readEndpointsFile(cfg config) ([]models.Endpoint, error) {
	if cfg.EndpointsFile == "" {
		return nil, nil
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("USERSYNC_ENDPOINTS_FILE: %s: %s", cfg.EndpointsFile, fmt.Sprintf(format, args...))
	}
	f, err := os.Open(cfg.EndpointsFile)
	if err != nil {
		return nil, fmt.Errorf("USERSYNC_ENDPOINTS_FILE: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxEndpointsFile+1))
	if err != nil {
		return nil, fmt.Errorf("USERSYNC_ENDPOINTS_FILE: %w", err)
	}
	if len(b) > maxEndpointsFile {
		return nil, fail("larger than %d bytes", maxEndpointsFile)
	}
	var file endpointsFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&file); err != nil {
		return nil, fail(`not {"endpoints": [{"name", "url", "secret", "eventTypes", "description", "enabled"}]}: %v`, err)
	}
	if len(file.Endpoints) > models.MaxEndpoints {
		return nil, fail("%d endpoints, more than the %d usersync keeps", len(file.Endpoints), models.MaxEndpoints)
	}
	var out []models.Endpoint
	seen := map[string]bool{}
	for i, e := range file.Endpoints {
		at := fmt.Sprintf("endpoint %d (%q)", i+1, e.Name)
		switch {
		case !endpointName.MatchString(e.Name):
			return nil, fail("%s: name must be 1 to 40 of a-z, 0-9, _ and -", at)
		case seen[e.Name]:
			return nil, fail("%s: the name is given twice", at)
		}
		if err := models.CheckEndpointDescription(e.Description); err != nil {
			return nil, fail("%s: %v", at, err)
		}
		seen[e.Name] = true
		if err := outbound.CheckURL(e.URL, cfg.EndpointsAllowPrivate); err != nil {
			return nil, fail("%s: %v", at, err)
		}
		if err := outbound.CheckSecret(e.Secret); err != nil {
			return nil, fail("%s: secret: %v", at, err)
		}
		if err := models.CheckEventTypes(e.EventTypes); err != nil {
			return nil, fail("%s: %v", at, err)
		}
		out = append(out, models.Endpoint{ID: "cfg_" + e.Name, URL: e.URL, Secret: e.Secret, EventTypes: e.EventTypes,
			Description: e.Description, Enabled: e.Enabled == nil || *e.Enabled, FromConfig: true})
	}
	return out, nil
}

// putConfigEndpoints writes the endpoints of the file to the store, and
// deletes those from configuration no longer in it; the API's endpoints
// stay as they are. Each is written over the revision read (a change an
// admin or the sender makes meanwhile, on another instance, is read again
// and overwritten by the file, never undone by an older read). A store
// that holds more than models.MaxEndpoints endpoints starts all the same,
// with a warning that names the cause and the fix.
func putConfigEndpoints(ctx context.Context, ob repository.Outbound, eps []models.Endpoint, now time.Time, log *slog.Logger) error {
	keep := map[string]bool{}
	for _, e := range eps {
		keep[e.ID] = true
		if err := putConfigEndpoint(ctx, ob, e, now); err != nil {
			return fmt.Errorf("USERSYNC_ENDPOINTS_FILE: %w", err)
		}
	}
	stored, err := ob.Endpoints(ctx)
	if err != nil {
		return fmt.Errorf("read the outbound endpoints: %w", err)
	}
	apiCount, cfgCount := 0, 0
	for _, e := range stored {
		switch {
		case !e.FromConfig:
			apiCount++
		case !keep[e.ID]:
			if err := ob.DeleteEndpoint(ctx, e.ID); err != nil && !errors.Is(err, models.ErrNotFound) {
				return fmt.Errorf("USERSYNC_ENDPOINTS_FILE: delete %s, no longer in the file: %w", e.ID, err)
			}
		default:
			cfgCount++
		}
	}
	if apiCount+cfgCount > models.MaxEndpoints {
		fix := "delete the ones no longer needed with DELETE /v1/endpoints/{id} (or the console)"
		if cfgCount > 0 {
			fix += ", or remove some from USERSYNC_ENDPOINTS_FILE"
		}
		log.Warn(fmt.Sprintf("outbound webhooks: the store holds %d endpoints, more than the %d usersync keeps; "+
			"no new endpoint can be created until there are fewer: %s", apiCount+cfgCount, models.MaxEndpoints, fix),
			slog.Int("api_endpoints", apiCount), slog.Int("file_endpoints", cfgCount))
	}
	return nil
}

// putConfigEndpointTries bounds the tries of one endpoint of the file: a
// retry follows its creation or deletion by another instance.
const putConfigEndpointTries = 4

// putConfigEndpoint creates e, an endpoint of the file, or writes the
// file's settings over the one stored (repository.ChangeEndpoint).
func putConfigEndpoint(ctx context.Context, ob repository.Outbound, e models.Endpoint, now time.Time) error {
	for try := 0; try < putConfigEndpointTries; try++ {
		_, err := repository.ChangeEndpoint(ctx, ob, e.ID, func(cur *models.Endpoint) error {
			created, rev := cur.CreatedAt, cur.Revision
			*cur = e
			cur.CreatedAt, cur.UpdatedAt, cur.Revision = created, now, rev
			return nil
		})
		if !errors.Is(err, models.ErrNotFound) {
			return err
		}
		e.CreatedAt, e.UpdatedAt = now, now
		err = ob.CreateEndpoint(ctx, e)
		if !errors.Is(err, models.ErrConflict) { // created meanwhile, by another instance
			return err
		}
	}
	return fmt.Errorf("%s: other instances kept creating or deleting it: %w", e.ID, models.ErrRetryLater)
}

// warnPlainHTTP warns of each endpoint that keeps plain http:// to what
// may be a public address, which a URL set now could not: one stored
// before usersync judged plain http, or one of the endpoints file. It
// keeps working; the warning names the fix.
func warnPlainHTTP(ctx context.Context, ob repository.Outbound, log *slog.Logger) error {
	eps, err := ob.Endpoints(ctx)
	if err != nil {
		return fmt.Errorf("read the outbound endpoints: %w", err)
	}
	for _, e := range eps {
		if !(e.LegacyURL || e.FromConfig) || !outbound.PlainHTTP(e.URL) {
			continue
		}
		from, fix := "stored before usersync refused it", "PATCH /v1/endpoints/"+e.ID+" (or the console)"
		if e.FromConfig {
			from, fix = "from USERSYNC_ENDPOINTS_FILE", "the endpoints file"
		}
		host := ""
		if u, err := url.Parse(e.URL); err == nil {
			host = u.Host // never the rest of the URL, which may carry a token
		}
		log.Warn("outbound webhooks: an endpoint on plain http://, "+from+", keeps working, its messages unencrypted; "+
			"a new one would be refused on a public address: move it to https:// in "+fix+", or set USERSYNC_ENDPOINTS_ALLOW_HTTP=true",
			slog.String("endpoint", e.ID), slog.String("host", host))
	}
	return nil
}
