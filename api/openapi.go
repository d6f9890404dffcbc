package api

import (
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
)

// openAPI is the OpenAPI 3.1 document of the whole HTTP API; a test checks
// it against the registered routes.
//
//go:embed openapi.json
var openAPI []byte

func (s *server) openAPI(c echo.Context) error {
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, openAPI)
}
