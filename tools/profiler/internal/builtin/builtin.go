// Package builtin is a library of well-known models with their real
// parameter tensors (names and shapes as torchvision and Hugging Face
// register them) and the forward FLOPs each parameter's layer costs per
// sample, for when there is no trace to profile.
package builtin

import (
	"fmt"
	"sort"
	"strings"
)

// Param is one parameter tensor in registration order.
type Param struct {
	Name  string
	Shape []int64
	// FwdFLOPs is the forward cost per sample of the layer this parameter
	// belongs to, attributed to its weight (biases and norms carry their
	// own small elementwise cost).
	FwdFLOPs float64
}

// Numel returns the number of elements.
func (p Param) Numel() int64 {
	n := int64(1)
	for _, d := range p.Shape {
		n *= d
	}
	return n
}

// Model is a built-in model.
type Model struct {
	Name string
	// Input describes what one sample is (e.g. "224x224 image").
	Input  string
	Params []Param
}

// Numel returns the total parameter count.
func (m *Model) Numel() int64 {
	var n int64
	for _, p := range m.Params {
		n += p.Numel()
	}
	return n
}

// FwdFLOPs returns the forward FLOPs per sample.
func (m *Model) FwdFLOPs() float64 {
	var f float64
	for _, p := range m.Params {
		f += p.FwdFLOPs
	}
	return f
}

var registry = map[string]func() *Model{
	"resnet50":  func() *Model { return resnet("resnet50", []int{3, 4, 6, 3}) },
	"resnet101": func() *Model { return resnet("resnet101", []int{3, 4, 23, 3}) },
	"vgg16":     vgg16,
	"bert-base": bert,
	"gpt2":      gpt2,
	"lstm":      lstm,
}

var aliases = map[string]string{"resnet-50": "resnet50", "resnet-101": "resnet101", "vgg-16": "vgg16",
	"bert": "bert-base", "bert_base": "bert-base", "gpt-2": "gpt2", "gpt2-small": "gpt2"}

// Names lists the built-in models.
func Names() []string {
	var n []string
	for k := range registry {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// Get returns a built-in model by name (case-insensitive).
func Get(name string) (*Model, error) {
	k := strings.ToLower(name)
	if a, ok := aliases[k]; ok {
		k = a
	}
	f, ok := registry[k]
	if !ok {
		return nil, fmt.Errorf("no built-in model %q (have %s)", name, strings.Join(Names(), ", "))
	}
	return f(), nil
}

type builder struct{ m *Model }

func (b *builder) add(name string, flops float64, shape ...int64) {
	b.m.Params = append(b.m.Params, Param{Name: name, Shape: shape, FwdFLOPs: flops})
}

// conv adds a bias-free convolution at output resolution hw.
func (b *builder) conv(name string, cout, cin, k, hw int64) {
	b.add(name+".weight", 2*float64(cout*cin*k*k*hw*hw), cout, cin, k, k)
}

// bn adds a batch norm over c channels at resolution hw.
func (b *builder) bn(name string, c, hw int64) {
	b.add(name+".weight", 2*float64(c*hw*hw), c)
	b.add(name+".bias", 2*float64(c*hw*hw), c)
}

func (b *builder) linear(name string, out, in, tokens int64, bias bool) {
	b.add(name+".weight", 2*float64(out*in*tokens), out, in)
	if bias {
		b.add(name+".bias", float64(out*tokens), out)
	}
}

// resnet is torchvision's ResNet v1.5 (stride on the 3×3 conv) at 224×224.
func resnet(name string, blocks []int) *Model {
	b := &builder{&Model{Name: name, Input: "224x224 image"}}
	b.conv("conv1", 64, 3, 7, 112)
	b.bn("bn1", 64, 112)
	in, hw := int64(64), int64(56)
	for l, n := range blocks {
		w := int64(64) << l
		for i := 0; i < n; i++ {
			p := fmt.Sprintf("layer%d.%d", l+1, i)
			inHW, outHW := hw, hw
			if i == 0 && l > 0 {
				outHW = hw / 2
			}
			b.conv(p+".conv1", w, in, 1, inHW)
			b.bn(p+".bn1", w, inHW)
			b.conv(p+".conv2", w, w, 3, outHW)
			b.bn(p+".bn2", w, outHW)
			b.conv(p+".conv3", 4*w, w, 1, outHW)
			b.bn(p+".bn3", 4*w, outHW)
			if i == 0 {
				b.conv(p+".downsample.0", 4*w, in, 1, outHW)
				b.bn(p+".downsample.1", 4*w, outHW)
			}
			in, hw = 4*w, outHW
		}
	}
	b.linear("fc", 1000, 2048, 1, true)
	return b.m
}

// vgg16 is torchvision's VGG-16 (no batch norm) at 224×224.
func vgg16() *Model {
	b := &builder{&Model{Name: "vgg16", Input: "224x224 image"}}
	cfg := []int64{64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0}
	in, hw, idx := int64(3), int64(224), 0
	for _, c := range cfg {
		if c == 0 {
			hw /= 2
			idx++
			continue
		}
		p := fmt.Sprintf("features.%d", idx)
		b.conv(p, c, in, 3, hw)
		b.add(p+".bias", float64(c*hw*hw), c)
		in = c
		idx += 2 // conv, ReLU
	}
	b.linear("classifier.0", 4096, 512*7*7, 1, true)
	b.linear("classifier.3", 4096, 4096, 1, true)
	b.linear("classifier.6", 1000, 4096, 1, true)
	return b.m
}

func (b *builder) layerNorm(name string, d, tokens int64) {
	b.add(name+".weight", 5*float64(d*tokens), d)
	b.add(name+".bias", float64(d*tokens), d)
}

// bert is Hugging Face's bert-base-uncased BertModel (with pooler) at
// sequence length 128.
func bert() *Model {
	const d, ff, seq = 768, 3072, 128
	b := &builder{&Model{Name: "bert-base", Input: "128-token sequence"}}
	b.add("embeddings.word_embeddings.weight", 0, 30522, d)
	b.add("embeddings.position_embeddings.weight", 0, 512, d)
	b.add("embeddings.token_type_embeddings.weight", 0, 2, d)
	b.layerNorm("embeddings.LayerNorm", d, seq)
	for i := 0; i < 12; i++ {
		p := fmt.Sprintf("encoder.layer.%d.", i)
		b.linear(p+"attention.self.query", d, d, seq, true)
		b.linear(p+"attention.self.key", d, d, seq, true)
		// the value projection carries the attention matmuls (QKᵀ and AV)
		b.linear(p+"attention.self.value", d, d, seq, true)
		b.m.Params[len(b.m.Params)-2].FwdFLOPs += 2 * 2 * seq * seq * d
		b.linear(p+"attention.output.dense", d, d, seq, true)
		b.layerNorm(p+"attention.output.LayerNorm", d, seq)
		b.linear(p+"intermediate.dense", ff, d, seq, true)
		b.linear(p+"output.dense", d, ff, seq, true)
		b.layerNorm(p+"output.LayerNorm", d, seq)
	}
	b.linear("pooler.dense", d, d, 1, true)
	return b.m
}

// gpt2 is Hugging Face's GPT2Model (124M; Conv1D weights are in×out) at
// sequence length 1024.
func gpt2() *Model {
	const d, seq = 768, 1024
	b := &builder{&Model{Name: "gpt2", Input: "1024-token sequence"}}
	b.add("wte.weight", 0, 50257, d)
	b.add("wpe.weight", 0, 1024, d)
	conv1d := func(name string, in, out int64) {
		b.add(name+".weight", 2*float64(in*out*seq), in, out)
		b.add(name+".bias", float64(out*seq), out)
	}
	for i := 0; i < 12; i++ {
		p := fmt.Sprintf("h.%d.", i)
		b.layerNorm(p+"ln_1", d, seq)
		conv1d(p+"attn.c_attn", d, 3*d)
		b.m.Params[len(b.m.Params)-2].FwdFLOPs += 2 * 2 * seq * seq * d
		conv1d(p+"attn.c_proj", d, d)
		b.layerNorm(p+"ln_2", d, seq)
		conv1d(p+"mlp.c_fc", d, 4*d)
		conv1d(p+"mlp.c_proj", 4*d, d)
	}
	b.layerNorm("ln_f", d, seq)
	return b.m
}

// lstm is the 2-layer, 650-unit LSTM language model of Zaremba et al.
// (medium PTB: 10k vocabulary, 35 steps), named as PyTorch's
// word_language_model registers it.
func lstm() *Model {
	const v, h, steps = 10000, 650, 35
	b := &builder{&Model{Name: "lstm", Input: "35-token sequence"}}
	b.add("encoder.weight", 0, v, h)
	for l := 0; l < 2; l++ {
		b.add(fmt.Sprintf("rnn.weight_ih_l%d", l), 2*float64(4*h*h*steps), 4*h, h)
		b.add(fmt.Sprintf("rnn.weight_hh_l%d", l), 2*float64(4*h*h*steps), 4*h, h)
		b.add(fmt.Sprintf("rnn.bias_ih_l%d", l), float64(4*h*steps), 4*h)
		b.add(fmt.Sprintf("rnn.bias_hh_l%d", l), float64(4*h*steps), 4*h)
	}
	b.linear("decoder", v, h, steps, true)
	return b.m
}
