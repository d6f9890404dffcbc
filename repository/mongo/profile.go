package mongo

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/usersync/usersync/models"
)

// profileDoc is the profile part of a users document, inlined in userDoc.
// Strings Clerk has no value for are stored as null, and so is every
// field of a tombstone (the flags: false).
type profileDoc struct {
	FirstName    *string    `bson:"firstName"`
	LastName     *string    `bson:"lastName"`
	Username     *string    `bson:"username"`
	ImageURL     *string    `bson:"imageUrl"`
	PhoneNumber  *string    `bson:"phoneNumber"`
	ExternalID   *string    `bson:"externalId"`
	LastSignInAt *time.Time `bson:"lastSignInAt"`
	Banned       bool       `bson:"banned"`
	Locked       bool       `bson:"locked"`
	// Deprovisioned is absent on users written before it existed: false.
	Deprovisioned bool `bson:"deprovisioned"`
	// SourceCreatedAt is Clerk's created_at; absent on users written
	// before it existed until a state of theirs is applied again.
	SourceCreatedAt *time.Time `bson:"sourceCreatedAt"`
}

func newProfileDoc(p models.Profile) profileDoc {
	str := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	d := profileDoc{
		FirstName: str(p.FirstName), LastName: str(p.LastName), Username: str(p.Username),
		ImageURL: str(p.ImageURL), PhoneNumber: str(p.PhoneNumber), ExternalID: str(p.ExternalID),
		Banned: p.Banned, Locked: p.Locked, Deprovisioned: p.Deprovisioned,
	}
	if p.LastSignInAt != nil {
		t := p.LastSignInAt.UTC()
		d.LastSignInAt = &t
	}
	if p.SourceCreatedAt != nil {
		t := p.SourceCreatedAt.UTC()
		d.SourceCreatedAt = &t
	}
	return d
}

// set is the profile as the $set of an update; a zero profileDoc clears
// every field (a tombstone).
func (d profileDoc) set() bson.D {
	return bson.D{
		{Key: "firstName", Value: d.FirstName},
		{Key: "lastName", Value: d.LastName},
		{Key: "username", Value: d.Username},
		{Key: "imageUrl", Value: d.ImageURL},
		{Key: "phoneNumber", Value: d.PhoneNumber},
		{Key: "externalId", Value: d.ExternalID},
		{Key: "lastSignInAt", Value: d.LastSignInAt},
		{Key: "banned", Value: d.Banned},
		{Key: "locked", Value: d.Locked},
		{Key: "deprovisioned", Value: d.Deprovisioned},
		{Key: "sourceCreatedAt", Value: d.SourceCreatedAt},
	}
}

func (d profileDoc) model() models.Profile {
	p := models.Profile{
		FirstName: deref(d.FirstName), LastName: deref(d.LastName), Username: deref(d.Username),
		ImageURL: deref(d.ImageURL), PhoneNumber: deref(d.PhoneNumber), ExternalID: deref(d.ExternalID),
		Banned: d.Banned, Locked: d.Locked, Deprovisioned: d.Deprovisioned,
	}
	if d.LastSignInAt != nil {
		t := d.LastSignInAt.UTC()
		p.LastSignInAt = &t
	}
	if d.SourceCreatedAt != nil {
		t := d.SourceCreatedAt.UTC()
		p.SourceCreatedAt = &t
	}
	return p
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
