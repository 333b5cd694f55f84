//go:build tools

package health

// Pins google.golang.org/genproto past its split into googleapis/api and
// googleapis/rpc: pebble's graph requires an old monolithic genproto that
// holds the same packages as the split modules etcd's client uses, and
// `go mod tidy` would drop a requirement nothing imports, bringing the
// "ambiguous import" back. The tools tag keeps it out of every build.
import _ "google.golang.org/genproto/protobuf/field_mask"
