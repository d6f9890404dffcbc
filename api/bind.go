package api

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/usersync/usersync/models"
)

// maxUnknownNamed bounds how many unknown query parameters an error names.
const maxUnknownNamed = 3

// bind binds the path and query parameters into req, a pointer to a struct
// whose fields carry `param` and `query` tags, and validates it. Errors wrap
// models.ErrInvalid and name the parameter at fault; a client's values
// appear in them only bounded and quoted (models.Quote). A query parameter
// that req does not declare is refused: silently ignoring a misspelt
// includeDeleted would answer a different question than the one asked.
// So is a parameter given with an empty value (?email=, as an application
// that interpolates a missing value sends): it would filter nothing and
// answer every user. Only an empty cursor is taken, as the first page.
func bind(c echo.Context, req any) error {
	if err := decodePathParams(c); err != nil {
		return err
	}
	var b echo.DefaultBinder
	if err := b.BindPathParams(c, req); err != nil {
		return paramError(req, "param", c.ParamNames(), func(n string) string { return c.Param(n) })
	}
	q := c.QueryParams()
	if err := unknownParams(req, q); err != nil {
		return err
	}
	if err := emptyParams(q); err != nil {
		return err
	}
	if err := b.BindQueryParams(c, req); err != nil {
		return paramError(req, "query", slices.Collect(maps.Keys(q)), q.Get)
	}
	if err := checkRanges(req, q); err != nil {
		return err
	}
	return models.Validate(req)
}

// checkQuery refuses, for every route, a query string that does not decode
// and a parameter given twice. Go's own parsing would drop a pair it
// cannot decode (?email=100%@example.com would list every user) and take
// the first of two values (includeDeleted=false&includeDeleted=true):
// either way the answer would be to a question other than the one asked.
func checkQuery(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := parseQuery(c.Request().URL.RawQuery); err != nil {
			return err
		}
		return next(c)
	}
}

// parseQuery checks raw as url.ParseQuery would read it, and refuses what
// it would silently drop or choose.
func parseQuery(raw string) error {
	seen := map[string]bool{}
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if strings.Contains(pair, ";") {
			return models.Public(models.ErrInvalid, "the query string holds a semicolon: separate parameters with &")
		}
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			return models.Public(models.ErrInvalid, "a query parameter's name is not valid percent-encoding (write %% as %%25)")
		}
		if _, err := url.QueryUnescape(v); err != nil {
			return models.Public(models.ErrInvalid, "query parameter %s is not valid percent-encoding (write %% as %%25)", models.Quote(name))
		}
		if seen[name] {
			return models.Public(models.ErrInvalid, "query parameter %s is given more than once", models.Quote(name))
		}
		seen[name] = true
	}
	return nil
}

// decodePathParams percent-decodes the path parameters. echo leaves them
// as sent when the path holds escapes it routed on (%2F), and decoded
// otherwise.
func decodePathParams(c echo.Context) error {
	if c.Request().URL.RawPath == "" {
		return nil // echo routed on the decoded path: the values are decoded
	}
	names, values := c.ParamNames(), c.ParamValues()
	decoded := make([]string, len(values))
	for i, v := range values {
		d, err := url.PathUnescape(v)
		if err != nil {
			name := "path"
			if i < len(names) {
				name = names[i]
			}
			return models.Public(models.ErrInvalid, "path parameter %s is not valid percent-encoding", name).In(name)
		}
		decoded[i] = d
	}
	c.SetParamValues(decoded...)
	return nil
}

// fields returns the struct fields of req (a pointer to a struct) tagged
// with tag, by parameter name.
func fields(req any, tag string) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	t := reflect.TypeOf(req).Elem()
	for i := range t.NumField() {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get(tag), ","); name != "" && name != "-" {
			out[name] = f
		}
	}
	return out
}

// unknownParams refuses query parameters that req does not declare.
func unknownParams(req any, q url.Values) error {
	known := fields(req, "query")
	var unknown []string
	for k := range q {
		if _, ok := known[k]; !ok {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	var named []string
	for _, k := range unknown[:min(len(unknown), maxUnknownNamed)] {
		named = append(named, models.Quote(k))
	}
	more := ""
	if len(unknown) > maxUnknownNamed {
		more = fmt.Sprintf(" and %d more", len(unknown)-maxUnknownNamed)
	}
	takes := "no query parameters"
	if len(known) > 0 {
		takes = "only " + strings.Join(slices.Sorted(maps.Keys(known)), ", ")
	}
	return models.Public(models.ErrInvalid, "unknown query parameter %s%s (this endpoint takes %s)",
		strings.Join(named, ", "), more, takes)
}

// emptyParams refuses a query parameter whose value is empty, naming it,
// but for cursor: an empty cursor is the first page.
func emptyParams(q url.Values) error {
	for _, name := range slices.Sorted(maps.Keys(q)) {
		if name != "cursor" && q.Get(name) == "" {
			return models.Public(models.ErrInvalid, "query parameter %s is empty: give it a value, or leave it out", models.Quote(name)).In(name)
		}
	}
	return nil
}

// paramError says which of the given parameters could not be read into its
// field of req, and what it must be.
func paramError(req any, tag string, names []string, get func(string) string) error {
	fs := fields(req, tag)
	slices.Sort(names)
	for _, name := range names {
		f, ok := fs[name]
		if !ok {
			continue
		}
		if msg := checkKind(name, f, get(name)); msg != "" {
			return models.Public(models.ErrInvalid, "%s", msg).In(name)
		}
	}
	return models.Public(models.ErrInvalid, "a parameter has a value of the wrong type")
}

// checkKind returns what is wrong with v as a value of field f, or "".
func checkKind(name string, f reflect.StructField, v string) string {
	switch f.Type.Kind() {
	case reflect.Int, reflect.Int64, reflect.Int32:
		if _, err := strconv.ParseInt(v, 10, 64); err != nil {
			return wholeNumber(name, f)
		}
	case reflect.Bool:
		if _, err := strconv.ParseBool(v); err != nil {
			return name + " must be true or false"
		}
	}
	return ""
}

// checkRanges gives integer parameters outside their validate min/max the
// same message as a value that is not a number.
func checkRanges(req any, q url.Values) error {
	val := reflect.ValueOf(req).Elem()
	for name, f := range fields(req, "query") {
		if !q.Has(name) || !val.FieldByIndex(f.Index).CanInt() {
			continue
		}
		n := val.FieldByIndex(f.Index).Int()
		lo, hasLo := tagInt(f, "min")
		hi, hasHi := tagInt(f, "max")
		if (hasLo && n < lo) || (hasHi && n > hi) {
			return models.Public(models.ErrInvalid, "%s", wholeNumber(name, f)).In(name)
		}
	}
	return nil
}

func wholeNumber(name string, f reflect.StructField) string {
	lo, hasLo := tagInt(f, "min")
	hi, hasHi := tagInt(f, "max")
	if hasLo && hasHi {
		return fmt.Sprintf("%s must be a whole number from %d to %d", name, lo, hi)
	}
	return name + " must be a whole number"
}

// tagInt reads rule=<int> from f's validate tag.
func tagInt(f reflect.StructField, rule string) (int64, bool) {
	for r := range strings.SplitSeq(f.Tag.Get("validate"), ",") {
		if v, ok := strings.CutPrefix(r, rule+"="); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// notFound gives err, if it wraps models.ErrNotFound, a message that names
// the thing by the client's value, bounded and quoted; other errors pass.
func notFound(err error, what, id string) error {
	if errors.Is(err, models.ErrNotFound) {
		return models.Public(models.ErrNotFound, "%s %s: not found", what, models.Quote(id))
	}
	return err
}
