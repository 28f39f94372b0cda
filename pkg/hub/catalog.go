package hub

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/catalog"
)

// The catalog file (pkg/catalog reads it): virtual servers, the
// aggregate's naming policy. The hub reads it at start, again when it
// changes (its modification time or size, looked at every
// CatalogPoll; then its content, whose hash says whether it really
// changed) and on SIGHUP (ReloadCatalog). A catalog that does not parse,
// or names a virtual server like a real one, is refused: the one in force
// stays, and why is logged and shown in switchboard://catalog (and so on
// the dashboard).
//
// Instances share the catalog in force through the broker
// (catalog_cluster.go): the newest change anywhere is served everywhere
// within moments, even when each instance reads a file of its own that
// changes at its own time (a ConfigMap reaches each pod when it does).
// What the catalog makes of the servers connected is computed with every
// view of the registry (registry_catalog.go).

// Defaults of the catalog.
const (
	// DefaultCatalogPoll is how often the catalog file is looked at.
	DefaultCatalogPoll = 250 * time.Millisecond
	// maxCatalogBytes bounds a catalog file, and one shared by another
	// instance.
	maxCatalogBytes = 4 << 20
)

// loadedCatalog is a catalog in force, and what names it across the
// cluster: its content's hash, and when it was written.
type loadedCatalog struct {
	cat *catalog.Catalog
	raw []byte
	// stamp orders catalogs across the cluster, the later wins: a file's
	// modification time when an instance starts, the moment a change was
	// seen after (never before the catalog it replaces).
	stamp  time.Time
	sum    string // SHA-256 of raw, in hex
	origin string // the instance that read it from its file
}

// newer reports whether c is to replace o: written later, or, at the
// same moment, the larger hash (every instance picks alike).
func (c *loadedCatalog) newer(o *loadedCatalog) bool {
	if o == nil {
		return true
	}
	if !c.stamp.Equal(o.stamp) {
		return c.stamp.After(o.stamp)
	}
	return c.sum > o.sum
}

func catalogSum(raw []byte) string {
	s := sha256.Sum256(raw)
	return hex.EncodeToString(s[:])
}

// catalogRefusal is why the last catalog offered was refused.
type catalogRefusal struct {
	At       time.Time         `json:"at"`
	From     string            `json:"from"` // "file", or the instance that shared it
	Message  string            `json:"message"`
	Problems []catalog.Problem `json:"problems,omitempty"`
}

// fileStamp is what says, without reading a file, that it may have
// changed.
type fileStamp struct {
	mod  time.Time
	size int64
}

func stampOf(fi os.FileInfo) fileStamp { return fileStamp{mod: fi.ModTime(), size: fi.Size()} }

// catalogKeeper keeps the catalog in force.
type catalogKeeper struct {
	h    *Hub
	path string // "" without a catalog
	cur  atomic.Pointer[loadedCatalog]

	mu      sync.Mutex      // serialises loads; guards the fields below
	fileSum string          // the file's content as last read
	seen    fileStamp       // the file as last looked at
	refused *catalogRefusal // nil once a catalog was taken after it
	share   *catalogShare   // the broker's side (catalog_cluster.go)
}

func newCatalogKeeper(h *Hub, path string) *catalogKeeper {
	return &catalogKeeper{h: h, path: path}
}

// current returns the catalog in force, or nil.
func (ck *catalogKeeper) current() *loadedCatalog { return ck.cur.Load() }

// start reads the catalog file, which must be good, shares it with the
// cluster and watches the file.
func (ck *catalogKeeper) start(ctx context.Context) error {
	if ck.path == "" {
		return nil
	}
	raw, st, err := readCatalogFile(ck.path)
	if err != nil {
		return err
	}
	lc := &loadedCatalog{raw: raw, stamp: st.mod, sum: catalogSum(raw), origin: ck.h.id}
	if lc.cat, err = catalog.Parse(raw); err != nil {
		return fmt.Errorf("catalog file %s: %w", filepath.Base(ck.path), err)
	}
	ck.mu.Lock()
	ck.fileSum, ck.seen = lc.sum, st
	ck.mu.Unlock()
	ck.cur.Store(lc)
	ck.h.log.Info("catalog loaded", "file", filepath.Base(ck.path), "virtualServers", len(lc.cat.VirtualServers))
	if err := ck.startSharing(ctx); err != nil {
		return err
	}
	if !ck.h.goOwned(ck.watch) {
		return errors.New("hub closed")
	}
	return nil
}

// watch looks at the catalog file every CatalogPoll until the hub closes.
func (ck *catalogKeeper) watch() {
	h := ck.h
	tick := time.NewTicker(h.cfg.CatalogPoll)
	defer tick.Stop()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-tick.C:
			_ = ck.readFile(false)
		}
	}
}

// readFile reads the catalog file again, when it may have changed (always
// when forced), and offers it if its content did change.
func (ck *catalogKeeper) readFile(force bool) error {
	st, err := statCatalog(ck.path)
	ck.mu.Lock()
	if err == nil && !force && st == ck.seen {
		ck.mu.Unlock()
		return nil
	}
	ck.mu.Unlock()
	raw, st, err := readCatalogFile(ck.path)
	if err != nil {
		ck.mu.Lock()
		changed := ck.seen != (fileStamp{})
		ck.seen = fileStamp{} // read again at the next look
		ck.mu.Unlock()
		if changed || force {
			ck.refuse("file", err)
		}
		return err
	}
	sum := catalogSum(raw)
	ck.mu.Lock()
	ck.seen = st
	same := sum == ck.fileSum
	ck.fileSum = sum
	ck.mu.Unlock()
	if same {
		return nil
	}
	lc := &loadedCatalog{raw: raw, stamp: time.Now(), sum: sum, origin: ck.h.id}
	if cur := ck.current(); cur != nil && !lc.stamp.After(cur.stamp) {
		lc.stamp = cur.stamp.Add(time.Nanosecond) // a change is newer than what it changes
	}
	if err := ck.offer(lc, "file"); err != nil {
		return err
	}
	ck.publish(lc)
	return nil
}

// ReloadCatalog reads the catalog file again (SIGHUP): a catalog that
// changed is put in force, on every instance, unless it is refused (the
// error says why, and the one in force stays). Without a catalog it does
// nothing.
func (h *Hub) ReloadCatalog() error {
	if h.catalog.path == "" {
		return nil
	}
	return h.catalog.readFile(true)
}

// offer puts a catalog in force, unless it is refused or, offered by
// another instance, older than the one in force. from says where it came
// from: "file", or the instance that shared it.
func (ck *catalogKeeper) offer(lc *loadedCatalog, from string) error {
	h := ck.h
	if lc.cat == nil {
		var err error
		if lc.cat, err = catalog.Parse(lc.raw); err != nil {
			ck.refuse(from, err)
			return err
		}
	}
	ck.mu.Lock()
	cur := ck.current()
	if cur != nil && (cur.sum == lc.sum || from != "file" && !lc.newer(cur)) {
		ck.mu.Unlock()
		return nil
	}
	if err := lc.cat.CheckNames(h.reg.view().names); err != nil {
		ck.mu.Unlock()
		ck.refuse(from, err)
		return err
	}
	ck.cur.Store(lc)
	ck.refused = nil
	ck.mu.Unlock()
	h.log.Info("catalog in force", "from", from, "virtualServers", len(lc.cat.VirtualServers), "sum", lc.sum[:12])
	h.reg.reannounce() // clients hear of what changed; switchboard://catalog's subscribers too
	return nil
}

// refuse records and logs why a catalog was refused; the one in force
// stays.
func (ck *catalogKeeper) refuse(from string, err error) {
	h := ck.h
	r := &catalogRefusal{At: time.Now().UTC(), From: from, Message: err.Error()}
	var ce *catalog.Error
	if errors.As(err, &ce) {
		r.Problems = ce.Problems
		r.Message = "the catalog has mistakes"
	}
	ck.mu.Lock()
	ck.refused = r
	ck.mu.Unlock()
	h.log.Error("catalog refused; the one in force stays", "from", from, "err", err)
	h.builtinsChanged()
}

// readCatalogFile reads a catalog file of at most maxCatalogBytes. Its
// errors name the file by its base name only: they reach the dashboard.
func readCatalogFile(path string) ([]byte, fileStamp, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("catalog file %s: cannot be read", filepath.Base(path))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("catalog file %s: cannot be read", filepath.Base(path))
	}
	raw, err := io.ReadAll(io.LimitReader(f, maxCatalogBytes+1))
	switch {
	case err != nil:
		return nil, fileStamp{}, fmt.Errorf("catalog file %s: cannot be read", filepath.Base(path))
	case len(raw) > maxCatalogBytes:
		return nil, fileStamp{}, fmt.Errorf("catalog file %s: larger than %d bytes", filepath.Base(path), maxCatalogBytes)
	}
	return raw, stampOf(fi), nil
}

func statCatalog(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return stampOf(fi), nil
}

// catalogDoc is the content of switchboard://catalog.
type catalogDoc struct {
	Instance string `json:"instance"`
	// File is the catalog file's base name ("" when the hub has none).
	File string `json:"file,omitempty"`
	// InForce says which catalog is served: its hash, when it was
	// written and which instance read it from its file.
	InForce *catalogInForce `json:"inForce,omitempty"`
	// Refused says why the last catalog offered was not taken.
	Refused        *catalogRefusal   `json:"refused,omitempty"`
	Discovery      catalog.Discovery `json:"discovery"` // of /mcp
	VirtualServers []catalog.Summary `json:"virtualServers"`
	Aggregate      *aggregateDoc     `json:"aggregate,omitempty"`
	// Source is the catalog's text, for admins only: fixed arguments may
	// hold what only operators should see.
	Source string `json:"source,omitempty"`
}

type catalogInForce struct {
	SHA256  string    `json:"sha256"`
	Written time.Time `json:"written"`
	Origin  string    `json:"origin"`
}

// aggregateDoc is the aggregate's naming policy and what it could not
// name.
type aggregateDoc struct {
	Names     catalog.NameMode   `json:"names"`
	Conflicts []catalog.Conflict `json:"conflicts,omitempty"`
}

// readCatalog reads switchboard://catalog: for operators (dashboard and
// admin tokens), the source for admins only.
func (h *Hub) readCatalog(s *session) ([]byte, error) {
	v := h.reg.view()
	ck := h.catalog
	doc := catalogDoc{Instance: h.id, Discovery: cmpDiscovery(h.cfg.Discovery), VirtualServers: []catalog.Summary{}}
	if ck.path != "" {
		doc.File = filepath.Base(ck.path)
	}
	ck.mu.Lock()
	doc.Refused = ck.refused
	ck.mu.Unlock()
	if lc := ck.current(); lc != nil {
		doc.InForce = &catalogInForce{SHA256: lc.sum, Written: lc.stamp.UTC(), Origin: lc.origin}
		if s.who.isAdmin() {
			doc.Source = string(lc.raw)
		}
	}
	if v.cat != nil {
		for _, name := range slices.Sorted(maps.Keys(v.cat.virtual)) {
			doc.VirtualServers = append(doc.VirtualServers, v.cat.virtual[name].view.Summary())
		}
		if nl := v.cat.names; nl != nil && v.cat.source != nil {
			ad := &aggregateDoc{Names: cmpNames(v.cat.source.cat.Aggregate.Names)}
			ad.Conflicts = append(slices.Clone(nl.names[kindTools].Conflicts()), nl.names[kindPrompts].Conflicts()...)
			doc.Aggregate = ad
		}
	}
	return json.Marshal(doc)
}

func cmpDiscovery(d catalog.Discovery) catalog.Discovery {
	if d == "" {
		return catalog.DiscoveryList
	}
	return d
}

func cmpNames(m catalog.NameMode) catalog.NameMode {
	if m == "" {
		return catalog.NamesPrefix
	}
	return m
}

// catalogTopic is where instances share the catalog in force.
const catalogTopic = "catalog"
