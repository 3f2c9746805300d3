package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// readmeMaxLines is the most lines README.md, the front page, may have.
const readmeMaxLines = 250

var (
	atxHeading = regexp.MustCompile(`^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$`)
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	inlineLink = regexp.MustCompile(`\[([^\]]*)\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	htmlTag    = regexp.MustCompile(`<[^>]*>`)
	hasScheme  = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// slugger gives GitHub's anchors for a page's headings in order: the
// heading's text lower-cased, everything but letters, digits, '-', '_'
// and spaces dropped, spaces turned into '-'; a slug seen before gets
// -1, -2, ... (as github-slugger does).
type slugger map[string]int

func (s slugger) slug(heading string) string {
	text := inlineLink.ReplaceAllString(heading, "$1")
	text = htmlTag.ReplaceAllString(text, "")
	text = strings.NewReplacer("`", "", "*", "").Replace(text)
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	base := b.String()
	result := base
	for {
		if _, seen := s[result]; !seen {
			break
		}
		s[base]++
		result = fmt.Sprintf("%s-%d", base, s[base])
	}
	s[result] = 0
	return result
}

type link struct {
	line   int
	target string
}

type page struct {
	anchors map[string]bool
	links   []link
}

// parse reads a page's heading anchors and its inline links, skipping
// fenced code blocks and code spans.
func parse(text string) page {
	p := page{anchors: map[string]bool{}}
	s := slugger{}
	fence := ""
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		if m := atxHeading.FindStringSubmatch(line); m != nil {
			p.anchors[s.slug(m[2])] = true
		}
		for _, m := range inlineLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, "code"), -1) {
			p.links = append(p.links, link{line: i + 1, target: m[2]})
		}
	}
	return p
}

// pages reads README.md and docs/*.md, keyed by their path from the
// repository's root.
func pages(t *testing.T) map[string]page {
	t.Helper()
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"README.md"}
	for _, f := range files {
		names = append(names, "docs/"+f)
	}
	out := map[string]page{}
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join("..", name))
		if err != nil {
			t.Fatal(err)
		}
		out[name] = parse(string(b))
	}
	return out
}

// broken lists the relative links of the pages that point nowhere: a
// file that does not exist, or an anchor no heading of its page makes.
func broken(root string, ps map[string]page) []string {
	var out []string
	for name, p := range ps {
		for _, l := range p.links {
			if l.target == "" || hasScheme.MatchString(l.target) || strings.HasPrefix(l.target, "//") {
				continue
			}
			file, anchor, _ := strings.Cut(l.target, "#")
			to := name
			if file != "" {
				to = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(name), file)))
			}
			where := fmt.Sprintf("%s:%d: %s", name, l.line, l.target)
			target, isPage := ps[to]
			if !isPage {
				if _, err := os.Stat(filepath.Join(root, to)); err != nil {
					out = append(out, where+": no file "+to)
				} else if anchor != "" && strings.HasSuffix(to, ".md") {
					out = append(out, where+": anchor in a page this test does not read")
				}
				continue
			}
			if anchor != "" && !target.anchors[anchor] {
				out = append(out, where+": no heading in "+to+" makes #"+anchor)
			}
		}
	}
	return out
}

func TestLinks(t *testing.T) {
	for _, b := range broken("..", pages(t)) {
		t.Error(b)
	}
}

func TestReadmeIsAFrontPage(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if n := strings.Count(strings.TrimSuffix(text, "\n"), "\n") + 1; n > readmeMaxLines {
		t.Errorf("README.md has %d lines, more than %d: move the detail to a page in docs/", n, readmeMaxLines)
	}
	for _, cmd := range []string{"make run", "make test"} {
		if !strings.Contains(text, cmd) {
			t.Errorf("README.md does not say %q", cmd)
		}
	}
}

func TestSlug(t *testing.T) {
	s := slugger{}
	for _, c := range []struct{ heading, want string }{
		{"Configuration (`gateway.yaml`)", "configuration-gatewayyaml"},
		{"GET /debug/health", "get-debughealth"},
		{"Sessions on io_uring loops (`io_loops`)", "sessions-on-io_uring-loops-io_loops"},
		{"The owner's HTTP endpoints and metrics", "the-owners-http-endpoints-and-metrics"},
		{"Roles and split brain", "roles-and-split-brain"},
		{"Roles and split brain", "roles-and-split-brain-1"},
		{"Roles and split brain", "roles-and-split-brain-2"},
		{"Roles and split brain 1", "roles-and-split-brain-1-1"},
		{"A [linked](x.md) **word**", "a-linked-word"},
	} {
		if got := s.slug(c.heading); got != c.want {
			t.Errorf("slug(%q) = %q, want %q", c.heading, got, c.want)
		}
	}
}

func TestBrokenFindsMissingAnchorsAndFiles(t *testing.T) {
	ps := map[string]page{
		"README.md":    parse("# Top\n\n## Part\n\n[ok](#part) [ok](docs/a.md#a-b-1) [bad](#nope) [bad](docs/none.md) [web](https://example.com/#x)\n"),
		"docs/a.md":    parse("# A\n\n## A b\n\n## A b\n\n```\n## Not a heading\n```\n[ok](../README.md#top) [bad](#not-a-heading) [ok](#a-b) [ok](../go.mod)\n"),
		"docs/code.md": parse("`[not a link](#nowhere)`\n"),
	}
	got := broken("..", ps)
	want := map[string]bool{
		"README.md:5: #nope: no heading in README.md makes #nope":                    true,
		"README.md:5: docs/none.md: no file docs/none.md":                            true,
		"docs/a.md:10: #not-a-heading: no heading in docs/a.md makes #not-a-heading": true,
	}
	if len(got) != len(want) {
		t.Errorf("broken: %q, want %d", got, len(want))
	}
	for _, g := range got {
		if !want[g] {
			t.Errorf("unexpected %q", g)
		}
	}
}
