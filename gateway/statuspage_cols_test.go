package gateway_test

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// fillCall is the page script's fill(tbody, rows, empty text, colspan).
var fillCall = regexp.MustCompile(`fill\(\$\('([a-z]+)'\), \w+, '[^']*', (\d+)\)`)

// Each table's "nothing here" row spans all of its columns.
func TestStatusPageEmptyRowsSpanTheirTables(t *testing.T) {
	raw, err := os.ReadFile("statuspage.html")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	cols := map[string]int{} // tbody id -> header cells
	var walk func(n *html.Node, table *html.Node)
	walk = func(n *html.Node, table *html.Node) {
		if n.Type == html.ElementNode && n.Data == "table" {
			table = n
		}
		if n.Type == html.ElementNode && n.Data == "tbody" && table != nil {
			for _, a := range n.Attr {
				if a.Key == "id" {
					cols[a.Val] = countTH(table)
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, table)
		}
	}
	walk(doc, nil)
	calls := fillCall.FindAllStringSubmatch(string(raw), -1)
	if len(calls) != len(cols) || len(calls) < 4 {
		t.Fatalf("%d fill calls for %d tables %v", len(calls), len(cols), cols)
	}
	for _, m := range calls {
		span, _ := strconv.Atoi(m[2])
		if span != cols[m[1]] {
			t.Errorf("table %s: empty row spans %d columns of %d", m[1], span, cols[m[1]])
		}
	}
}

func countTH(n *html.Node) int {
	c := 0
	if n.Type == html.ElementNode && n.Data == "th" {
		c++
	}
	for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
		c += countTH(ch)
	}
	return c
}
