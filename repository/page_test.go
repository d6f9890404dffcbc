package repository_test

import (
	"slices"
	"strconv"
	"testing"

	"github.com/usersync/usersync/repository"
)

// TestPage_FullPagesWhateverKeepRefuses reads a list of 0..19 by pages of
// 3, keeping the numbers that are not multiples of 4 (runs of refused
// items longer than a batch included): every page is full but the last,
// and next is "" only at the end.
func TestPage_FullPagesWhateverKeepRefuses(t *testing.T) {
	list := make([]int, 20)
	for i := range list {
		list[i] = i
	}
	refused := map[int]bool{0: true, 4: true, 8: true, 9: true, 10: true, 11: true, 12: true, 16: true}
	reads := 0
	read := func(after string, n int) ([]int, error) {
		reads++
		start := 0
		if after != "" {
			a, _ := strconv.Atoi(after)
			start = a + 1
		}
		return list[min(start, len(list)):min(start+n, len(list))], nil
	}
	keep := func(i int) bool { return !refused[i] }
	id := func(i int) string { return strconv.Itoa(i) }
	var got []int
	after := ""
	for range 20 {
		page, next, err := repository.Page(3, after, read, keep, id)
		if err != nil {
			t.Fatal(err)
		}
		if next != "" && len(page) != 3 {
			t.Errorf("page %v after %q is not full, and next is %q", page, after, next)
		}
		got = append(got, page...)
		if next == "" {
			break
		}
		after = next
	}
	want := slices.DeleteFunc(slices.Clone(list), func(i int) bool { return refused[i] })
	if !slices.Equal(got, want) {
		t.Errorf("pages = %v, want %v", got, want)
	}
}
