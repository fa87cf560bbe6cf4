package cmdutil

import (
	"bufio"
	"io"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// Table lays rows of cells out in aligned columns, as text/tabwriter does
// for baton's tables (tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) with every
// row ending in a cell): each column but the last as wide as its widest
// cell, counted in runes, plus two spaces. It keeps the cells' bytes one
// after another and their widths only, where tabwriter works through each
// cell's bytes, text and padding again as it writes (ADR 0029: that was
// most of `baton status`'s own time), and a string per cell would be much
// of its memory.
type Table struct {
	cols  int
	width []int
	text  []byte  // every cell's bytes, one after another
	ends  []int32 // where each cell ends in text
}

// NewTable starts a table whose first row is header; every row has as many
// cells.
func NewTable(header ...string) *Table {
	t := &Table{cols: len(header), width: make([]int, len(header))}
	t.Row(header...)
	return t
}

// Row adds a row. A row with fewer cells than the header is padded with
// empty ones; extra cells are dropped. A row begun with Add must be
// complete first.
func (t *Table) Row(cells ...string) {
	for i := range t.cols {
		c := ""
		if i < len(cells) {
			c = cells[i]
		}
		t.Add(c)
	}
}

// Grow makes room for rows more rows (of about as many bytes as those
// added so far), so that a table of 100k rows is not copied as it grows.
func (t *Table) Grow(rows int) {
	if t.cols == 0 || rows <= 0 {
		return
	}
	t.ends = slices.Grow(t.ends, rows*t.cols)
	perRow := 8 * t.cols
	if n := t.Len(); n > 0 {
		perRow = max(perRow, len(t.text)/n)
	}
	t.text = slices.Grow(t.text, rows*perRow)
}

// Add adds a cell to the row being added: the header's first column's
// after a complete row, the next one's otherwise.
func (t *Table) Add(cell string) {
	t.text = append(t.text, cell...)
	t.end()
}

// AddInt adds a cell of n in decimal (as strconv.Itoa writes it).
func (t *Table) AddInt(n int64) {
	t.text = strconv.AppendInt(t.text, n, 10)
	t.end()
}

// AddUint adds a cell of n in decimal.
func (t *Table) AddUint(n uint64) {
	t.text = strconv.AppendUint(t.text, n, 10)
	t.end()
}

// AddDuration adds a cell of d as Describe writes it.
func (t *Table) AddDuration(d time.Duration) {
	// String, inlined, makes the text on the stack: Describe's result
	// would be a string on the heap per cell.
	t.Add(described(d).String())
}

// end ends the cell whose bytes were just appended.
func (t *Table) end() {
	if t.cols == 0 {
		return
	}
	start := 0
	if len(t.ends) > 0 {
		start = int(t.ends[len(t.ends)-1])
	}
	if i := len(t.ends) % t.cols; i < t.cols-1 {
		if n := runes(t.text[start:]); n > t.width[i] {
			t.width[i] = n
		}
	}
	t.ends = append(t.ends, int32(len(t.text)))
}

// runes counts the runes of b, as utf8.RuneCount does; a cell of ASCII,
// as most are, is counted by its length.
func runes(b []byte) int {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return utf8.RuneCount(b)
		}
	}
	return len(b)
}

// Len is the number of rows, the header's included.
func (t *Table) Len() int {
	if t.cols == 0 {
		return 0
	}
	return len(t.ends) / t.cols
}

// WriteTo writes the table to w through a buffer of its own.
func (t *Table) WriteTo(w io.Writer) (int64, error) {
	bw := bufio.NewWriterSize(w, 64<<10)
	var spaces [256]byte
	for i := range spaces {
		spaces[i] = ' '
	}
	var n int64
	start := 0
	for r := 0; r+t.cols <= len(t.ends); r += t.cols {
		for i, end := range t.ends[r : r+t.cols] {
			c := t.text[start:end]
			start = int(end)
			k, _ := bw.Write(c)
			n += int64(k)
			if i == t.cols-1 {
				break
			}
			for pad := t.width[i] + 2 - runes(c); pad > 0; {
				k, _ := bw.Write(spaces[:min(pad, len(spaces))])
				n += int64(k)
				pad -= k
			}
		}
		k, _ := bw.WriteString("\n")
		n += int64(k)
	}
	return n, bw.Flush()
}
