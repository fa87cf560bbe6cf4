package cmdutil

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"reflect"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// PrintJSON writes v as one indented JSON document, as a json.Encoder
// with a two-space indent writes it. A map[string]any document is written
// member by member, and the elements of its slice members one by one, so
// that a document of 100k rows is never held whole (status --json once
// spent more growing that one buffer than listing the sessions); the rows
// of a long slice are laid out on every CPU, and written in order.
func PrintJSON(w io.Writer, v any) error {
	doc, ok := v.(map[string]any)
	if !ok {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	if len(doc) == 0 {
		_, err := io.WriteString(w, "{}\n")
		return err
	}
	var (
		buf     []byte
		scratch bytes.Buffer
	)
	for i, k := range slices.Sorted(maps.Keys(doc)) {
		sep := "{\n  "
		if i > 0 {
			sep = ",\n  "
		}
		name, err := json.Marshal(k)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "%s%s: ", sep, name); err != nil {
			return err
		}
		rv := reflect.ValueOf(doc[k])
		if rv.Kind() != reflect.Slice || rv.Len() == 0 || rv.Type().Elem().Kind() == reflect.Uint8 {
			buf, err = layOut(buf[:0], "  ", doc[k], &scratch)
			if err == nil {
				_, err = w.Write(buf)
			}
			if err != nil {
				return err
			}
			continue
		}
		if rv.Len() >= parallelRows && runtime.GOMAXPROCS(0) > 1 {
			err = writeRowsParallel(w, rv)
		} else {
			buf, err = layRows(buf[:0], rv, 0, rv.Len(), &scratch)
			if _, werr := w.Write(buf); err == nil {
				err = werr
			}
		}
		if err != nil {
			return err
		}
		if _, err := io.WriteString(w, "\n  ]"); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, "\n}\n")
	return err
}

// rowChunk is how many rows of a slice a goroutine lays out at a time, and
// parallelRows the least number of rows laid out on several.
const (
	rowChunk     = 512
	parallelRows = 4 * rowChunk
)

// layRows appends the rows from..to of the slice rv, each after its
// separator. On an error, what it appended before the row that failed is
// kept.
func layRows(dst []byte, rv reflect.Value, from, to int, scratch *bytes.Buffer) ([]byte, error) {
	for j := from; j < to; j++ {
		sep := ",\n    "
		if j == 0 {
			sep = "[\n    "
		}
		dst = append(dst, sep...)
		var err error
		if dst, err = layOut(dst, "    ", rv.Index(j).Interface(), scratch); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// writeRowsParallel writes the rows of rv as layRows lays them out, chunk
// by chunk in order, each chunk laid out by one of GOMAXPROCS goroutines, a
// few chunks ahead of the writing at most.
func writeRowsParallel(w io.Writer, rv reflect.Value) error {
	type laid struct {
		b   []byte
		err error
	}
	workers := runtime.GOMAXPROCS(0)
	chunks := (rv.Len() + rowChunk - 1) / rowChunk
	done := make([]chan laid, chunks)
	for k := range done {
		done[k] = make(chan laid, 1)
	}
	ahead := make(chan struct{}, 2*workers) // a slot per chunk taken and not yet written
	free := make(chan []byte, 2*workers)    // written chunks' buffers, for reuse
	stop := make(chan struct{})
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			var scratch bytes.Buffer
			for {
				select {
				case ahead <- struct{}{}:
				case <-stop:
					return
				}
				k := int(next.Add(1) - 1)
				if k >= chunks {
					return
				}
				var b []byte
				select {
				case b = <-free:
				default:
				}
				b, err := layRows(b[:0], rv, k*rowChunk, min(rv.Len(), (k+1)*rowChunk), &scratch)
				done[k] <- laid{b, err}
			}
		})
	}
	var err error
	for k := range chunks {
		l := <-done[k]
		<-ahead
		_, werr := w.Write(l.b)
		if err = cmp.Or(l.err, werr); err != nil {
			break
		}
		select {
		case free <- l.b:
		default:
		}
	}
	close(stop)
	wg.Wait()
	return err
}

// layOut appends v laid out as json.Indent(prefix, "  ") lays out its
// marshalled form. On an error it appends nothing.
func layOut(dst []byte, prefix string, v any, scratch *bytes.Buffer) ([]byte, error) {
	if r, ok := v.(indentAppender); ok {
		if out, ok := r.AppendIndentJSON(dst, prefix, "  "); ok {
			return out, nil
		}
	}
	b, ok := v.(json.RawMessage)
	if !ok || len(b) == 0 || needsMarshal(b) {
		// Marshal validates a raw message, escapes for HTML what it
		// holds unescaped and drops the space around it; a raw message
		// without any of that only needs Indent, which validates it
		// too.
		var err error
		if b, err = json.Marshal(v); err != nil {
			return dst, err
		}
	}
	scratch.Reset()
	if err := json.Indent(scratch, b, prefix, "  "); err != nil {
		return dst, err
	}
	return append(dst, scratch.Bytes()...), nil
}

// indentAppender is a value that lays itself out as json.Indent would lay
// out its MarshalJSON, in one pass (false: it cannot; marshal it).
type indentAppender interface {
	AppendIndentJSON(b []byte, prefix, indent string) ([]byte, bool)
}

// needsMarshal reports whether a raw message holds what json.Marshal would
// change: characters it escapes for HTML (<, >, &, U+2028, U+2029) or
// space after the value (Indent would keep it).
func needsMarshal(b []byte) bool {
	for _, c := range b {
		if c == '<' || c == '>' || c == '&' || c == 0xE2 { // 0xE2: U+2028 and U+2029 begin with it
			return true
		}
	}
	switch b[len(b)-1] {
	case ' ', '\t', '\r', '\n':
		return true
	}
	return false
}

// PrintJSONLine writes v as one line of JSON (for --watch streams).
func PrintJSONLine(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

// Since formats a time for people, UTC, to the second.
func Since(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// Fprintf writes to w, ignoring errors (for chatter).
func Fprintf(w io.Writer, format string, a ...any) {
	_, _ = fmt.Fprintf(w, format, a...)
}

// Version is baton's version: the module's (go install of a tag), else
// "dev" with the commit it was built from, as the build recorded it
// ("dev+0123456789ab", ".dirty" when the tree had changes), else "dev".
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	return VersionOf(bi)
}

// VersionOf is Version from the given build information.
func VersionOf(bi *debug.BuildInfo) string {
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v // a module version names its code already
	}
	var rev string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "dev"
	}
	v := "dev+" + rev[:min(len(rev), 12)]
	if dirty {
		v += ".dirty"
	}
	return v
}
