package mongo

import (
	"errors"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/usersync/usersync/models"
)

func extJSON(t *testing.T, s string) bson.Raw {
	t.Helper()
	var raw bson.Raw
	if err := bson.UnmarshalExtJSON([]byte(s), false, &raw); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return raw
}

// buildInfo answers, as the engines give them (shortened to what is read).
const (
	mongoDBBuildInfo = `{"version": "7.0.14", "gitVersion": "ce59cfc6a3c5e5c067dca0d30697edd68d4f5188",
		"modules": [], "versionArray": [7, 0, 14, 0], "bits": 64, "ok": 1.0}`
	ferretDB2BuildInfo = `{"version": "7.0.77", "gitVersion": "unknown", "versionArray": [7, 0, 77, 0],
		"ferretdb": {"version": "v2.5.0"}, "ok": 1.0}`
	ferretDB1BuildInfo = `{"version": "7.0.42", "gitVersion": "unknown", "modules": [], "sysInfo": "deprecated",
		"versionArray": [7, 0, 42, 0], "ferretdbVersion": "v1.24.2",
		"ferretdbFeatures": {"aggregationStages": ["$limit", "$match"]}, "ok": 1.0}`
	// Azure Cosmos DB and Amazon DocumentDB answer as the MongoDB version
	// they emulate.
	emulatedBuildInfo = `{"version": "5.0.0", "versionArray": [5, 0, 0, 0], "ok": 1.0}`
)

func TestIdentifyServer_FromBuildInfoAndHostNames(t *testing.T) {
	for _, tc := range []struct {
		name, buildInfo, uri string
		want                 serverKind
		wantString           string
	}{
		{"MongoDB", mongoDBBuildInfo, "mongodb://db1.example.net:27017,db2.example.net:27017/?replicaSet=rs0", kindMongoDB, "MongoDB 7.0.14"},
		{"Atlas", mongoDBBuildInfo, "mongodb+srv://app:pw@cluster0.abcde.mongodb.net/", kindMongoDB, "MongoDB 7.0.14"},
		{"FerretDB 2", ferretDB2BuildInfo, "mongodb://127.0.0.1:27017/", kindFerretDB2, "FerretDB v2.5.0"},
		{"FerretDB 1.x", ferretDB1BuildInfo, "mongodb://127.0.0.1:27017/", kindFerretDB1, "FerretDB v1.24.2"},
		{"Cosmos DB RU", emulatedBuildInfo, "mongodb://acct:pw@acct.mongo.cosmos.azure.com:10255/?ssl=true&retrywrites=false", kindCosmosRU,
			"Azure Cosmos DB for MongoDB (RU) 5.0.0"},
		{"Cosmos DB RU, older host", emulatedBuildInfo, "mongodb://acct:pw@acct.documents.azure.com:10255/?ssl=true", kindCosmosRU,
			"Azure Cosmos DB for MongoDB (RU) 5.0.0"},
		{"Cosmos DB vCore", emulatedBuildInfo, "mongodb+srv://u:p@c-app.mongocluster.cosmos.azure.com/?tls=true&retrywrites=false", kindCosmosVCore,
			"Azure Cosmos DB for MongoDB vCore 5.0.0"},
		{"Cosmos DB vCore, upper case", emulatedBuildInfo, "mongodb+srv://u:p@C-APP.MongoCluster.Cosmos.Azure.com/", kindCosmosVCore,
			"Azure Cosmos DB for MongoDB vCore 5.0.0"},
		{"Amazon DocumentDB", emulatedBuildInfo,
			"mongodb://u:p@docdb-1.cluster-c1x2y3.us-east-1.docdb.amazonaws.com:27017/?tls=true&replicaSet=rs0&readPreference=secondaryPreferred&retryWrites=false",
			kindAmazonDocumentDB, "Amazon DocumentDB 5.0.0"},
		{"Amazon DocumentDB elastic", emulatedBuildInfo, "mongodb+srv://u:p@el-1.us-east-1.docdb-elastic.amazonaws.com/", kindAmazonDocumentDB,
			"Amazon DocumentDB 5.0.0"},
		{"IPv6", mongoDBBuildInfo, "mongodb://[::1]:27017/", kindMongoDB, "MongoDB 7.0.14"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := identifyServer(extJSON(t, tc.buildInfo), tc.uri)
			if got.kind != tc.want || got.String() != tc.wantString {
				t.Errorf("identifyServer = %v (kind %d), want %q (kind %d)", got, got.kind, tc.wantString, tc.want)
			}
		})
	}
}

func TestRefuseServer_FerretDB1IsRefusedByName(t *testing.T) {
	err := refuseServer(identifyServer(extJSON(t, ferretDB1BuildInfo), "mongodb://localhost/"))
	if !errors.Is(err, models.ErrUnsupportedEngine) || !strings.Contains(err.Error(), "FerretDB v1.24.2") {
		t.Errorf("refuseServer(FerretDB 1.x) = %v, want ErrUnsupportedEngine naming it", err)
	}
	for _, bi := range []string{mongoDBBuildInfo, ferretDB2BuildInfo, emulatedBuildInfo} {
		if err := refuseServer(identifyServer(extJSON(t, bi), "mongodb://localhost/")); err != nil {
			t.Errorf("refuseServer(%s) = %v", bi, err)
		}
	}
}

// listIndexes answers, as the engines give them for the unique indexes
// usersync asked for.
const (
	usersIndexesMongoDB = `[
		{"v": 2, "key": {"_id": 1}, "name": "_id_"},
		{"v": 2, "key": {"userId": 1}, "name": "userId_1", "unique": true},
		{"v": 2, "key": {"email": 1}, "name": "email_1", "unique": true, "sparse": true}]`
	eventsIndexesMongoDB = `[
		{"v": 2, "key": {"_id": 1}, "name": "_id_"},
		{"v": 2, "key": {"eventId": 1}, "name": "eventId_1", "unique": true, "sparse": true}]`
	// FerretDB 1.24 took sparse: true and answers without it.
	usersIndexesFerretDB1 = `[
		{"v": 2, "key": {"_id": 1}, "name": "_id_"},
		{"v": 2, "key": {"userId": 1}, "name": "userId_1", "unique": true},
		{"v": 2, "key": {"email": 1}, "name": "email_1", "unique": true}]`
	// An engine that answers the options as numbers.
	usersIndexesNumeric = `[
		{"v": 2, "key": {"_id": 1}, "name": "_id_", "ns": "usersync.users"},
		{"v": 2, "key": {"userId": 1}, "name": "userId_1", "unique": 1},
		{"v": 2, "key": {"email": 1}, "name": "email_1", "unique": 1, "sparse": 1}]`
	// email_1 made by an application: unique among every document, so
	// that a tombstone without email blocks the next one.
	usersIndexesOfAnApp = `[
		{"v": 2, "key": {"_id": 1}, "name": "_id_"},
		{"v": 2, "key": {"userId": 1}, "name": "userId_1", "unique": true},
		{"v": 2, "key": {"email": 1}, "name": "email_1", "unique": true}]`
	usersIndexesPartial = `[
		{"v": 2, "key": {"userId": 1}, "name": "userId_1", "unique": true},
		{"v": 2, "key": {"email": 1}, "name": "email_1", "unique": true, "sparse": true,
		 "partialFilterExpression": {"deletedAt": null}}]`
	usersIndexesNoUserID = `[
		{"v": 2, "key": {"email": 1}, "name": "email_1", "unique": true, "sparse": true}]`
	orgIndexesMongoDB = `[
		{"v": 2, "key": {"_id": 1}, "name": "_id_"},
		{"v": 2, "key": {"organizationId": 1}, "name": "organizationId_1", "unique": true}]`
	membershipIndexesMongoDB = `[
		{"v": 2, "key": {"_id": 1}, "name": "_id_"},
		{"v": 2, "key": {"membershipId": 1}, "name": "membershipId_1", "unique": true},
		{"v": 2, "key": {"activeKey": 1}, "name": "activeKey_1", "unique": true, "sparse": true}]`
	invitationIndexesMongoDB = `[
		{"v": 2, "key": {"_id": 1}, "name": "_id_"},
		{"v": 2, "key": {"invitationId": 1}, "name": "invitationId_1", "unique": true}]`
	membershipIndexesNoPair = `[
		{"v": 2, "key": {"membershipId": 1}, "name": "membershipId_1", "unique": true},
		{"v": 2, "key": {"activeKey": 1}, "name": "activeKey_1"}]`
)

func specsOf(t *testing.T, answer string) []indexSpec {
	t.Helper()
	var docs []bson.Raw
	if err := bson.UnmarshalExtJSON([]byte(`{"a":`+answer+`}`), false, &struct {
		A *[]bson.Raw `bson:"a"`
	}{&docs}); err != nil {
		t.Fatalf("%s: %v", answer, err)
	}
	var specs []indexSpec
	for _, d := range docs {
		specs = append(specs, parseIndexSpec(d))
	}
	return specs
}

// TestCheckUniqueIndexes_RefusesAnEngineThatDidNotKeepTheRules checks the
// listIndexes answers after creation: an engine that kept every option
// passes; one that dropped sparse (FerretDB 1.x), an index made otherwise
// by an application, a partial one or a missing one is refused, naming
// the engine, the index and the rule it would break.
func TestCheckUniqueIndexes_RefusesAnEngineThatDidNotKeepTheRules(t *testing.T) {
	mongo := identifyServer(extJSON(t, mongoDBBuildInfo), "mongodb://localhost/")
	for _, tc := range []struct {
		name, users, events string
		srv                 Server
		want                string // "" to pass; else what the error names
		memberships         string // "" for membershipIndexesMongoDB
	}{
		{"MongoDB", usersIndexesMongoDB, eventsIndexesMongoDB, mongo, "", ""},
		{"options as numbers", usersIndexesNumeric, eventsIndexesMongoDB, mongo, "", ""},
		{"FerretDB 1.x", usersIndexesFerretDB1, eventsIndexesMongoDB, identifyServer(extJSON(t, ferretDB1BuildInfo), "mongodb://localhost/"),
			"FerretDB v1.24.2 holds index email_1 of users as unique=true sparse=false", ""},
		{"an application's email_1", usersIndexesOfAnApp, eventsIndexesMongoDB, mongo, "an email belongs to at most one active user", ""},
		{"partial", usersIndexesPartial, eventsIndexesMongoDB, mongo, "partial=true", ""},
		{"no userId index", usersIndexesNoUserID, eventsIndexesMongoDB, mongo, "did not create the unique index userId_1", ""},
		{"no eventId index", usersIndexesMongoDB, `[{"v": 2, "key": {"_id": 1}, "name": "_id_"}]`, mongo, "one event per svix-id", ""},
		{"activeKey not unique", usersIndexesMongoDB, eventsIndexesMongoDB, mongo, "at most one active membership per organization and user", membershipIndexesNoPair},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.memberships == "" {
				tc.memberships = membershipIndexesMongoDB
			}
			err := checkUniqueIndexes(tc.srv, map[string][]indexSpec{
				UsersCollection: specsOf(t, tc.users), EventsCollection: specsOf(t, tc.events),
				OrganizationsCollection: specsOf(t, orgIndexesMongoDB), MembershipsCollection: specsOf(t, tc.memberships),
				InvitationsCollection: specsOf(t, invitationIndexesMongoDB),
			})
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("checkUniqueIndexes = %v, want nil", err)
			case tc.want != "" && (!errors.Is(err, models.ErrUnsupportedEngine) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("checkUniqueIndexes = %v, want ErrUnsupportedEngine saying %q", err, tc.want)
			}
		})
	}
}

// TestCheckCanCreateUnique_CosmosRUOnlyOnEmptyCollections: Azure Cosmos
// DB for MongoDB (RU) builds a unique index only on an empty collection;
// usersync says so before trying.
func TestCheckCanCreateUnique_CosmosRUOnlyOnEmptyCollections(t *testing.T) {
	ru := identifyServer(extJSON(t, emulatedBuildInfo), "mongodb://a.mongo.cosmos.azure.com:10255/")
	vcore := identifyServer(extJSON(t, emulatedBuildInfo), "mongodb+srv://c.mongocluster.cosmos.azure.com/")
	missing := map[string][]string{UsersCollection: {emailIndex}}
	if err := checkCanCreateUnique(ru, missing, map[string]bool{UsersCollection: true}); !errors.Is(err, models.ErrUnsupportedEngine) ||
		!strings.Contains(err.Error(), "only on an empty collection") || !strings.Contains(err.Error(), "email_1") {
		t.Errorf("Cosmos DB RU, users populated: %v; want it refused, naming email_1", err)
	}
	for _, tc := range []struct {
		srv       Server
		populated bool
	}{{ru, false}, {vcore, true}, {identifyServer(extJSON(t, mongoDBBuildInfo), "mongodb://localhost/"), true}} {
		if err := checkCanCreateUnique(tc.srv, missing, map[string]bool{UsersCollection: tc.populated}); err != nil {
			t.Errorf("%v, populated %t: %v", tc.srv, tc.populated, err)
		}
	}
}
