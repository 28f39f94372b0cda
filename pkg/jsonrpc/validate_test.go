package jsonrpc

import (
	"bytes"
	"testing"
)

// FuzzTopMembers holds the members validate notes on its way through a
// top-level object to those a separate walk over the object finds: Decode
// uses the first in place of the second.
func FuzzTopMembers(f *testing.F) {
	for _, s := range []string{
		`{}`, ` { "a" : 1 , "b":[{"c":{}}], "d":"x\"y" } `, `{"a":{"b":{"c":[]}},"e":null}`,
		`{"1":1,"2":2,"3":3,"4":4,"5":5,"6":6,"7":7,"8":8}`, `{"1":1,"2":2,"3":3,"4":4,"5":5,"6":6,"7":7,"8":8,"9":9}`,
		`[{"a":1}]`, `"s"`, `{"a":1,}`, `{"\u0061":true}`,
		`{"a\\":"b\\\\\"c\\","d\"":"\\\\"}`, `"abc\\\"def`,
		`{"jsonrpc":"2.0","params":{"a":{"_meta":1},"_m\u0065ta":{}},"params":{"x":1}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// Strings, valid or not, end where their escapes read byte by byte
		// say they do.
		if len(data) > 0 && data[0] == '"' {
			if got, want := skipString(data, 0), skipStringByBytes(data, 0); got != want {
				t.Fatalf("skipString(%q) = %d, byte by byte %d", data, got, want)
			}
		}
		var top topMembers
		valid, _ := validate(data, 0, &top)
		obj := trimSpace(data)
		if !valid || obj[0] != '{' {
			return
		}
		// No params, said to hold no _meta, hold one.
		if !top.paramsMeta {
			for it := (objectIter{data: obj}); ; {
				k, v, ok := it.next()
				if !ok {
					break
				}
				if string(keyName(k)) != "params" {
					continue
				}
				for pk := range Members(v) {
					if string(pk) == "_meta" {
						t.Fatalf("%q: validate saw no _meta in params", data)
					}
				}
			}
		}
		n := 0
		for it := (objectIter{data: obj}); ; n++ {
			k, v, ok := it.next()
			if !ok {
				break
			}
			if n < len(top.m) && (!bytes.Equal(top.m[n].key, k) || !bytes.Equal(top.m[n].val, v)) {
				t.Fatalf("member %d of %q: validate noted %q: %q, the walk found %q: %q", n, data, top.m[n].key, top.m[n].val, k, v)
			}
		}
		if n != top.n {
			t.Fatalf("%q: validate noted %d members, the walk found %d", data, top.n, n)
		}
	})
}
