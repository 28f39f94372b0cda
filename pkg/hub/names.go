package hub

import "strings"

// reservedName is the hub's own name: its built-in resources carry it in
// _meta["switchboard/server"], so no server may take it.
const reservedName = "switchboard"

// normalizeName maps a server's name to the hub's alphabet [a-z0-9-]:
// lower case, every run of other characters becomes one '-', and leading and
// trailing '-' are dropped. The result may be empty.
func normalizeName(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
			continue
		}
		dash = true
	}
	return b.String()
}
