package main

import (
	"bufio"
	"bytes"
	"errors"
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
		if len(buf) > lr.max {
			return nil, size, true, nil
		}
		return buf, size, false, nil
	}
}
