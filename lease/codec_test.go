package lease

import (
	"testing"

	"github.com/batonhq/baton/internal/jsonrec/jsonrectest"
)

// The codecs written from the records' fields write and read every one of
// them as encoding/json does.
func TestCodecs(t *testing.T) {
	jsonrectest.CheckCodec(t, jsonrectest.Codec[Record]{
		Encode: (*Record).encodeFast,
		Decode: func(r *Record, b []byte) bool { return r.decodeFast(b, 0) },
		Known:  recordKnown,
	})
	jsonrectest.CheckCodec(t, jsonrectest.Codec[releaseNote]{Encode: (*releaseNote).encodeFast, Known: releaseNoteKnown})
}

// Whatever a lease's fast decoder takes, it reads as the general one does.
func FuzzRecordDecodeFast(f *testing.F) {
	for _, seed := range decodeSeeds() {
		f.Add([]byte(seed.value))
	}
	f.Add([]byte(`{"key":"k","holder":"h","host":"x","pid":1,"child_pid":0,"fence":3,"ttl":"10s","acquired_at":"2026-01-02T03:04:05Z","renewed_at":"2026-01-02T03:04:05.5Z","renewals":2,"transfer_to":"","prev_holder":"g","prev_fence":2,"chosen":true,"score":0,"capabilities":["a"],"require":null,"meta":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		jsonrectest.CheckFastDecode(t, data, func(r *Record, b []byte) bool { return r.decodeFast(b, 0) }, (*Record).unmarshalGeneral)
	})
}
