// Package readmetest runs every command block of the repository's
// README.md, as written, so that the README cannot drift from the tools:
// its test is the package. Each ```sh block is preceded by an HTML
// comment naming how it runs,
//
//	<!-- readme-test: KIND (why) -->
//
// where KIND names testdata/KIND.txtar, a testscript that runs the block
// (the file block.sh, beside it in the archive) and checks what it made,
// or is "skip" for a block the test cannot run (make test itself).
package readmetest
