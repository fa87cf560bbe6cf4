package jsonrectest

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/batonhq/baton/internal/jsonappend"
	"github.com/batonhq/baton/internal/jsonrec"
)

// v1 is a record and its codec, written as recgen writes them.
type v1 struct {
	Name  string            `json:"name"`
	Count int               `json:"count,omitempty"`
	Meta  map[string]string `json:"meta"`
}

var v1Known = map[string]bool{"name": true, "count": true, "meta": true}

func (v *v1) appendJSON(w *jsonappend.Writer) {
	w.Raw(`{"name":`)
	w.Str(v.Name)
	if v.Count != 0 {
		w.Raw(`,"count":`)
		w.Int(int64(v.Count))
	}
	w.Raw(`,"meta":`)
	w.StringMap(v.Meta)
	w.Raw(`}`)
}

func (v *v1) encodeFast() ([]byte, bool) {
	w := jsonappend.New(64)
	v.appendJSON(&w)
	return w.B, w.OK
}

func (v *v1) decodeFast(data []byte) bool {
	*v = v1{}
	s := jsonrec.NewScanner(data)
	return s.Lit(`{"name":`) && s.Str(&v.Name) &&
		(!s.Lit(`,"count":`) || s.Int(&v.Count)) &&
		s.Lit(`,"meta":`) && s.StringMap(&v.Meta, true) && s.Lit(`}`) && s.Done()
}

var v1Codec = Codec[v1]{
	Encode: (*v1).encodeFast,
	Decode: (*v1).decodeFast,
	Known:  v1Known,
}

func TestCheckCodec_PassesACodecOfEveryField(t *testing.T) {
	CheckCodec(t, v1Codec)
}

// v2 is v1 with a field added and its codec left as it was: what a record
// whose struct changed without go generate looks like.
type v2 struct {
	Name  string            `json:"name"`
	Count int               `json:"count,omitempty"`
	Meta  map[string]string `json:"meta"`
	Owner string            `json:"owner,omitempty"`
}

func TestCheckCodec_FailsAFieldTheCodecDoesNotKnow(t *testing.T) {
	stale := Codec[v2]{
		Encode: func(v *v2) ([]byte, bool) {
			old := v1{Name: v.Name, Count: v.Count, Meta: v.Meta}
			return old.encodeFast()
		},
		Decode: func(v *v2, b []byte) bool {
			var old v1
			ok := old.decodeFast(b)
			*v = v2{Name: old.Name, Count: old.Count, Meta: old.Meta}
			return ok
		},
		Known: v1Known,
	}
	rec := run(func(tb testing.TB) { CheckCodec(tb, stale) })
	for _, want := range []string{
		`the known fields are ["count" "meta" "name"]; its json tags name ["count" "meta" "name" "owner"]`,
		`only Owner set: the fast encoder wrote`,
		`"owner":"v-owner"`,
	} {
		if !strings.Contains(rec, want) {
			t.Errorf("CheckCodec's failures do not say %q:\n%s", want, rec)
		}
	}
}

// A fast decoder that reads a value differently is caught too.
func TestCheckCodec_FailsADecoderThatDiffers(t *testing.T) {
	wrong := v1Codec
	wrong.Decode = func(v *v1, b []byte) bool {
		ok := v.decodeFast(b)
		v.Count++
		return ok
	}
	if rec := run(func(tb testing.TB) { CheckCodec(tb, wrong) }); !strings.Contains(rec, "the fast decoder read") {
		t.Errorf("a decoder off by one passed:\n%s", rec)
	}
}

// recorder is a testing.TB that keeps what fails.
type recorder struct {
	testing.TB
	mu  sync.Mutex
	out strings.Builder
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(&r.out, format+"\n", args...)
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	panic(r)
}

// run runs check against a recorder and returns what it reported.
func run(check func(testing.TB)) string {
	r := &recorder{}
	func() {
		defer func() {
			if p := recover(); p != nil && p != any(r) {
				panic(p)
			}
		}()
		check(r)
	}()
	return r.out.String()
}
