package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// lineReader reads lines of at most max bytes. A longer line is skipped
// whole and reported as too long, so that one bad line does not stop the
// others.
type lineReader struct {
	r   *bufio.Reader
	max int
	n   int // the number of the last line read, from 1
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next line without its end of line ("\n" or "\r\n"),
// how many bytes it took in the input, and whether it was too long (then
// line is nil). At the end of the input it returns io.EOF.
func (lr *lineReader) next() (line []byte, size int, tooLong bool, err error) {
	var buf []byte
	for {
		chunk, err := lr.r.ReadSlice('\n')
		size += len(chunk)
		if !tooLong {
			if len(buf)+len(chunk) > lr.max+2 { // room for "\r\n"
				tooLong, buf = true, nil
			} else {
				buf = append(buf, chunk...)
			}
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && size == 0:
			return nil, 0, false, io.EOF
		case err != nil && !errors.Is(err, io.EOF):
			return nil, size, false, err
		}
		lr.n++
		if tooLong {
			return nil, size, true, nil
		}
		buf = bytes.TrimSuffix(bytes.TrimSuffix(buf, []byte("\n")), []byte("\r"))
		if lr.n == 1 { // a byte order mark, as editors on Windows write, is not part of the first job
			buf = bytes.TrimPrefix(buf, []byte("\uFEFF"))
		}
		if len(buf) > lr.max {
			return nil, size, true, nil
		}
		return buf, size, false, nil
	}
}

// line is a line of the input as feed hands it over.
type line struct {
	n       int    // its number, from 1
	text    []byte // without its end of line; nil when tooLong
	size    int    // the bytes it took in the input
	tooLong bool
	err     error // io.EOF at the end of the input, else the read error; the other fields are then unset
}

// feed reads lines and hands them over on out, one at a time, until the
// end of the input or a read error (handed over as the last line's err),
// or until stop is closed. It runs on a goroutine of its own, so that the
// receiver can wait for a line, a timer and a signal at once. A line is
// handed over only once read whole: a line cut short by stop is not. After
// stop is closed feed may stay blocked in a read of the input until that
// read returns (stdin: until the command exits or the writer closes it).
func (lr *lineReader) feed(out chan<- line, stop <-chan struct{}) {
	for {
		text, size, tooLong, err := lr.next()
		l := line{n: lr.n, text: text, size: size, tooLong: tooLong}
		switch {
		case errors.Is(err, io.EOF):
			l = line{err: err}
		case err != nil:
			l = line{err: fmt.Errorf("read line %d: %w", lr.n+1, err)}
		}
		select {
		case out <- l:
		case <-stop:
			return
		}
		if err != nil {
			return
		}
	}
}
