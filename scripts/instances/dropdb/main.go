// Command dropdb drops the database $MONGODB_DATABASE at $MONGODB_URI:
// scripts/instances.sh's clean-up of the database it made.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func main() {
	uri, db := os.Getenv("MONGODB_URI"), os.Getenv("MONGODB_DATABASE")
	if uri == "" || !strings.HasPrefix(db, "usersync_instances_") {
		fmt.Fprintln(os.Stderr, "dropdb: drops only a usersync_instances_* database named by MONGODB_DATABASE at MONGODB_URI")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err == nil {
		err = client.Database(db).Drop(ctx)
		_ = client.Disconnect(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dropdb:", err)
		os.Exit(1)
	}
}
