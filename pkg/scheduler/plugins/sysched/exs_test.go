package sysched

import "testing"

func TestClusterExS(t *testing.T) {
	s1, s2, s3 := []string{"1", "2", "3", "5"}, []string{"4", "7", "8"}, []string{"1", "3", "5", "9"}
	cases := []struct {
		name  string
		nodes map[string][][]string
		want  int
	}{
		{"empty cluster", nil, 0},
		{"one pod alone exposes nothing extra", map[string][][]string{"a": {s1}}, 0},
		// KEP-399's example: SySched's placement (S1 with S3, S2 alone) ends with ExS 2.
		{"KEP example, SySched placement", map[string][][]string{"a": {s1, s3}, "b": {s2}}, 2},
		// The other placement of the third pod: H={1,2,3,4,5,7,8} ∪ {9} on one node.
		{"KEP example, S3 beside S2", map[string][][]string{"a": {s1}, "b": {s2, s3}}, 7},
		{"duplicate names count once", map[string][][]string{"a": {{"x", "x"}, {"x", "y"}}}, 1},
		{"identical pods share a node for free", map[string][][]string{"a": {s1, s1, s1}}, 0},
	}
	for _, tc := range cases {
		if got := ClusterExS(tc.nodes); got != tc.want {
			t.Errorf("%s: ClusterExS = %d, want %d", tc.name, got, tc.want)
		}
	}
}
