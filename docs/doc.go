// Package docs holds the documentation pages (docs/*.md) that README.md
// links to. It has no code: its test checks that every relative link
// between README.md and these pages reaches a file, and a heading when it
// names an anchor, and that README.md stays a short front page.
package docs
