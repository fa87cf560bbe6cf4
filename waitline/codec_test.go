package waitline

import (
	"testing"

	"github.com/batonhq/baton/internal/jsonrec/jsonrectest"
)

// The ticket's codec writes and reads every field as encoding/json does.
func TestCodec(t *testing.T) {
	jsonrectest.CheckCodec(t, jsonrectest.Codec[Ticket]{
		Encode: (*Ticket).encodeFast,
		Decode: func(x *Ticket, b []byte) bool { return x.decodeFast(b, 0) },
		Known:  ticketKnown,
	})
}
