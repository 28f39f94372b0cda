package benchlab

import (
	"strings"
	"unicode/utf8"
)

// Table is a table of figures: rows of cells under a header, grouped in
// titled sections. It renders as aligned text for a terminal and as
// Markdown for a report.
type Table struct {
	header []string
	right  []bool // right-align this column (figures)
	rows   []tableRow
}

type tableRow struct {
	title string   // a section title when set, else cells
	cells []string // as many as the header, or fewer (the rest are empty)
}

// NewTable returns a table whose first leftCols columns are left-aligned
// labels and whose others are right-aligned figures.
func NewTable(leftCols int, header ...string) *Table {
	t := &Table{header: header, right: make([]bool, len(header))}
	for i := leftCols; i < len(header); i++ {
		t.right[i] = true
	}
	return t
}

// AlignLeft left-aligns column i: a column of text after the figures.
func (t *Table) AlignLeft(i int) { t.right[i] = false }

// Section starts a group of rows under a title.
func (t *Table) Section(title string) { t.rows = append(t.rows, tableRow{title: title}) }

// Add appends a row; missing trailing cells are empty, extra ones dropped.
func (t *Table) Add(cells ...string) {
	row := make([]string, len(t.header))
	copy(row, cells)
	t.rows = append(t.rows, tableRow{cells: row})
}

func width(s string) int { return utf8.RuneCountInString(s) }

// Text renders the table with columns padded to their widest cell, two
// spaces apart, a dashed rule under the header and a blank line and the
// title before each section.
func (t *Table) Text() string {
	w := make([]int, len(t.header))
	for i, h := range t.header {
		w[i] = width(h)
	}
	for _, r := range t.rows {
		for i, c := range r.cells {
			w[i] = max(w[i], width(c))
		}
	}
	var b strings.Builder
	line := func(cells []string) {
		var l strings.Builder
		for i, c := range cells {
			if i > 0 {
				l.WriteString("  ")
			}
			pad := strings.Repeat(" ", w[i]-width(c))
			if t.right[i] {
				l.WriteString(pad + c)
			} else {
				l.WriteString(c + pad)
			}
		}
		b.WriteString(strings.TrimRight(l.String(), " "))
		b.WriteByte('\n')
	}
	line(t.header)
	rule := make([]string, len(w))
	for i := range w {
		rule[i] = strings.Repeat("-", w[i])
	}
	line(rule)
	for i, r := range t.rows {
		if r.title != "" {
			if i > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(r.title + "\n")
			continue
		}
		line(r.cells)
	}
	return b.String()
}

// Markdown renders the table as a GitHub-flavoured Markdown table; a
// section is a row with its title in bold in the first column.
func (t *Table) Markdown() string {
	var b strings.Builder
	cell := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	row := func(cells []string) {
		b.WriteString("|")
		for _, c := range cells {
			b.WriteString(" " + cell(c) + " |")
		}
		b.WriteByte('\n')
	}
	row(t.header)
	b.WriteString("|")
	for _, r := range t.right {
		if r {
			b.WriteString("---:|")
		} else {
			b.WriteString("---|")
		}
	}
	b.WriteByte('\n')
	for _, r := range t.rows {
		if r.title != "" {
			cells := make([]string, len(t.header))
			cells[0] = "**" + r.title + "**"
			row(cells)
			continue
		}
		row(r.cells)
	}
	return b.String()
}
