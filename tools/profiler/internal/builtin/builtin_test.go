package builtin

import "testing"

// TestParamCounts checks the published parameter counts (torchvision and
// Hugging Face model cards; LSTM: 2·(4·650·(650+650)+2·4·650) + 2·10000·650 + 10000).
func TestParamCounts(t *testing.T) {
	want := map[string]int64{
		"resnet50": 25_557_032, "resnet101": 44_549_160, "vgg16": 138_357_544,
		"bert-base": 109_482_240, "gpt2": 124_439_808, "lstm": 19_780_400,
	}
	for _, n := range Names() {
		m, err := Get(n)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Numel(); got != want[n] {
			t.Errorf("%s: %d parameters, want %d", n, got, want[n])
		}
		seen := map[string]bool{}
		for _, p := range m.Params {
			if seen[p.Name] {
				t.Errorf("%s: duplicate %s", n, p.Name)
			}
			seen[p.Name] = true
		}
	}
	// forward GFLOPs per sample (multiply-add = 2): ResNet-50 ≈ 8.2, VGG-16 ≈ 31
	for n, g := range map[string][2]float64{"resnet50": {7.5, 8.5}, "vgg16": {30, 32}, "resnet101": {15, 16.5}} {
		m, _ := Get(n)
		if f := m.FwdFLOPs() / 1e9; f < g[0] || f > g[1] {
			t.Errorf("%s: %.2f GFLOPs, want in %v", n, f, g)
		}
	}
	if _, err := Get("alexnet"); err == nil {
		t.Error("unknown model accepted")
	}
}
