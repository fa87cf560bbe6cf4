package cmdutil

import (
	"bufio"
	"io"
	"unicode/utf8"
)

// Table lays rows of cells out in aligned columns, as text/tabwriter does
// for baton's tables (tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) with every
// row ending in a cell): each column but the last as wide as its widest
// cell, counted in runes, plus two spaces. It keeps the cells and their
// widths only, where tabwriter works through each cell's bytes, text and
// padding again as it writes: for 100k sessions that was most of `baton
// status`'s own time.
type Table struct {
	cols  int
	width []int
	cells []string
}

// NewTable starts a table whose first row is header; every row has as many
// cells.
func NewTable(header ...string) *Table {
	t := &Table{cols: len(header), width: make([]int, len(header))}
	t.Row(header...)
	return t
}

// Row adds a row. A row with fewer cells than the header is padded with
// empty ones; extra cells are dropped.
func (t *Table) Row(cells ...string) {
	for i := range t.cols {
		c := ""
		if i < len(cells) {
			c = cells[i]
		}
		if i < t.cols-1 {
			if n := utf8.RuneCountInString(c); n > t.width[i] {
				t.width[i] = n
			}
		}
		t.cells = append(t.cells, c)
	}
}

// Len is the number of rows, the header's included.
func (t *Table) Len() int {
	if t.cols == 0 {
		return 0
	}
	return len(t.cells) / t.cols
}

// WriteTo writes the table to w through a buffer of its own.
func (t *Table) WriteTo(w io.Writer) (int64, error) {
	bw := bufio.NewWriterSize(w, 64<<10)
	var spaces [256]byte
	for i := range spaces {
		spaces[i] = ' '
	}
	var n int64
	for r := 0; r < len(t.cells); r += t.cols {
		for i, c := range t.cells[r : r+t.cols] {
			k, _ := bw.WriteString(c)
			n += int64(k)
			if i == t.cols-1 {
				break
			}
			for pad := t.width[i] + 2 - utf8.RuneCountInString(c); pad > 0; {
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
