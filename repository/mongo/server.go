package mongo

import (
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/usersync/usersync/models"
)

// Server is what Prepare found at the URI: the engine and its version.
type Server struct {
	// Engine names the engine: MongoDB, FerretDB, Azure Cosmos DB for
	// MongoDB (RU or vCore), Amazon DocumentDB.
	Engine string
	// Version is the engine's own version where it says it (FerretDB's),
	// else the MongoDB version it answers as.
	Version string
	kind    serverKind
}

func (s Server) String() string {
	if s.Version == "" {
		return s.Engine
	}
	return s.Engine + " " + s.Version
}

type serverKind int

const (
	kindMongoDB serverKind = iota
	kindFerretDB1
	kindFerretDB2
	kindCosmosRU
	kindCosmosVCore
	kindAmazonDocumentDB
)

// identifyServer names the engine from its buildInfo answer and the hosts
// of the URI. FerretDB says so in buildInfo: FerretDB 1.x with
// ferretdbVersion, FerretDB 2 with ferretdb: {version}. Azure Cosmos DB
// and Amazon DocumentDB answer as MongoDB; their host names tell them, as
// the MongoDB drivers tell them (DRIVERS-2583): a host ending in
// .cosmos.azure.com (vCore clusters in .mongocluster.cosmos.azure.com;
// older RU accounts in .documents.azure.com), or in .docdb.amazonaws.com
// or .docdb-elastic.amazonaws.com. Behind a proxy or a private DNS name
// they pass for MongoDB; what Prepare checks of indexes (checkUniqueIndexes)
// does not depend on the name.
func identifyServer(buildInfo bson.Raw, uri string) Server {
	version, _ := buildInfo.Lookup("version").StringValueOK()
	if v, ok := buildInfo.Lookup("ferretdb", "version").StringValueOK(); ok {
		return Server{Engine: "FerretDB", Version: v, kind: kindFerretDB2}
	}
	if v, ok := buildInfo.Lookup("ferretdbVersion").StringValueOK(); ok {
		return Server{Engine: "FerretDB", Version: v, kind: kindFerretDB1}
	}
	for _, h := range uriHosts(uri) {
		switch {
		case strings.HasSuffix(h, ".mongocluster.cosmos.azure.com"):
			return Server{Engine: "Azure Cosmos DB for MongoDB vCore", Version: version, kind: kindCosmosVCore}
		case strings.HasSuffix(h, ".cosmos.azure.com") || strings.HasSuffix(h, ".documents.azure.com"):
			return Server{Engine: "Azure Cosmos DB for MongoDB (RU)", Version: version, kind: kindCosmosRU}
		case strings.HasSuffix(h, ".docdb.amazonaws.com") || strings.HasSuffix(h, ".docdb-elastic.amazonaws.com"):
			return Server{Engine: "Amazon DocumentDB", Version: version, kind: kindAmazonDocumentDB}
		}
	}
	return Server{Engine: "MongoDB", Version: version, kind: kindMongoDB}
}

// uriHosts are the host names of a MongoDB URI, lowercased, without
// ports: for mongodb+srv, the name before the DNS lookup.
func uriHosts(uri string) []string {
	_, rest, ok := strings.Cut(uri, "://")
	if !ok {
		return nil
	}
	rest, _, _ = strings.Cut(rest, "/")
	rest, _, _ = strings.Cut(rest, "?")
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		rest = rest[at+1:]
	}
	var hosts []string
	for _, h := range strings.Split(rest, ",") {
		if strings.HasPrefix(h, "[") { // [::1]:27017
			h, _, _ = strings.Cut(h[1:], "]")
		} else {
			h, _, _ = strings.Cut(h, ":")
		}
		if h != "" {
			hosts = append(hosts, strings.ToLower(h))
		}
	}
	return hosts
}

// refuseServer refuses, before anything is written, an engine that
// cannot hold what usersync depends on whatever the database holds.
// FerretDB 1.x runs an update as a read, a check and a rewrite, not
// atomically, and does not keep an index's sparse option.
func refuseServer(srv Server) error {
	if srv.kind == kindFerretDB1 {
		return fmt.Errorf("MONGODB_URI is %s: FerretDB 1.x does not apply an update atomically or keep an index's sparse option, "+
			"on which usersync's ordering and its unique email rule depend; use FerretDB 2 or MongoDB: %w", srv, models.ErrUnsupportedEngine)
	}
	return nil
}

// indexSpec is what listIndexes says of an index.
type indexSpec struct {
	Name   string
	Unique bool
	Sparse bool
	// Partial is the index's partialFilterExpression, if any.
	Partial bool
}

// parseIndexSpec reads one document of a listIndexes answer. Engines
// answer unique and sparse as a bool, some as a number.
func parseIndexSpec(raw bson.Raw) indexSpec {
	truthy := func(key string) bool {
		v := raw.Lookup(key)
		if b, ok := v.BooleanOK(); ok {
			return b
		}
		if n, ok := v.AsInt64OK(); ok {
			return n != 0
		}
		return false
	}
	name, _ := raw.Lookup("name").StringValueOK()
	_, partial := raw.Lookup("partialFilterExpression").DocumentOK()
	return indexSpec{Name: name, Unique: truthy("unique"), Sparse: truthy("sparse"), Partial: partial}
}

// uniqueRule is a unique index correctness needs and what it keeps true.
type uniqueRule struct {
	base   string // the collection's name without prefix
	index  string
	sparse bool // documents without the field are not indexed (and so not unique)
	keeps  string
}

// uniqueRules are the unique indexes usersync's correctness rests on.
// Email and eventId are plain sparse unique indexes, not partial ones
// (which Amazon DocumentDB supports only from 5.0, and which DocumentDB
// engines handle differently): a user's email field is present only
// while the user is active, an event's eventId only when it has one.
var uniqueRules = []uniqueRule{
	{UsersCollection, "userId_1", false, "one document per Clerk user"},
	{UsersCollection, emailIndex, true, "an email belongs to at most one active user"},
	{EventsCollection, "eventId_1", true, "one event per svix-id, however often it is delivered"},
	{OrganizationsCollection, "organizationId_1", false, "one document per Clerk organization"},
	{MembershipsCollection, "membershipId_1", false, "one document per Clerk membership"},
	{MembershipsCollection, activeKeyIndex, true, "at most one active membership per organization and user"},
	{InvitationsCollection, "invitationId_1", false, "one document per Clerk invitation"},
}

// checkUniqueIndexes checks, with the listIndexes answers of each
// collection (by its name without prefix), that the engine srv keeps the
// unique indexes usersync needs as usersync made them: unique, sparse
// where the rule says so, and not partial. An engine that took the
// options but dropped one (FerretDB 1.x answers email_1 without sparse),
// or an index of that name made otherwise by someone else, is refused
// with the rule it would break: at the first conflicting write is too late.
func checkUniqueIndexes(srv Server, specs map[string][]indexSpec) error {
	for _, r := range uniqueRules {
		var got *indexSpec
		for i := range specs[r.base] {
			if specs[r.base][i].Name == r.index {
				got = &specs[r.base][i]
			}
		}
		switch {
		case got == nil:
			return fmt.Errorf("%s did not create the unique index %s of %s, on which usersync relies for %q: %w",
				srv, r.index, r.base, r.keeps, models.ErrUnsupportedEngine)
		case !got.Unique || got.Sparse != r.sparse || got.Partial:
			return fmt.Errorf("%s holds index %s of %s as unique=%t sparse=%t partial=%t, want unique=true sparse=%t partial=false: "+
				"usersync relies on it for %q (an index made by another program, or an engine that does not keep these options): %w",
				srv, r.index, r.base, got.Unique, got.Sparse, got.Partial, r.sparse, r.keeps, models.ErrUnsupportedEngine)
		}
	}
	return nil
}

// checkCanCreateUnique refuses, before trying, a unique index the engine
// cannot build: Azure Cosmos DB for MongoDB (RU) creates a unique index
// only on an empty collection. missing are the unique indexes (by
// collection name without prefix) not there yet, and populated the
// collections that hold documents.
func checkCanCreateUnique(srv Server, missing map[string][]string, populated map[string]bool) error {
	if srv.kind != kindCosmosRU {
		return nil
	}
	for base, names := range missing {
		if len(names) > 0 && populated[base] {
			return fmt.Errorf("%s creates a unique index only on an empty collection, and %s holds documents without %s, "+
				"on which usersync relies: start from an empty database, or copy the data into collections that have them: %w",
				srv, base, strings.Join(names, ", "), models.ErrUnsupportedEngine)
		}
	}
	return nil
}
