// Package buildinfo reads the version of the running binary from the
// build information the Go toolchain stamps into it.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Info identifies a build of usersync.
type Info struct {
	// Version is the main module's version: a tag such as v1.2.0, a
	// pseudo-version derived from the VCS, or "(devel)" when the build had
	// no VCS information.
	Version string
	// Revision is the VCS commit the binary was built from, "unknown"
	// when the build had no VCS information.
	Revision string
	// Modified reports that the working tree had uncommitted changes.
	Modified bool
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string
}

// Read returns the build information of the running binary. It never
// fails: what the binary does not know is "unknown".
func Read() Info {
	info := Info{Version: "unknown", Revision: "unknown", GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	if bi.Main.Version != "" {
		info.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}
