// The graph text format: print -> parse -> print is byte-identical and gives the
// same graph, for hand-written texts, golden files and builder-made graphs that use
// every feature; bad texts fail with the line and a clear reason.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include "ir/error.h"
#include "ir/graph.h"
#include "ir/text.h"
#include "ops/op.h"

namespace isomer {
namespace {

// Parses `text`, checks that it prints back to itself and re-parses to the same graph.
Graph expect_canonical(const std::string& text) {
  Graph g = parse_graph(text);
  std::string printed = print_graph(g);
  EXPECT_EQ(printed, text);
  EXPECT_TRUE(same_graph(g, parse_graph(printed)));
  return g;
}

// Prints `g`, parses it back and checks the result is the same graph and prints the same.
Graph expect_round_trip(const Graph& g) {
  std::string text = print_graph(g);
  Graph back = parse_graph(text);
  EXPECT_TRUE(same_graph(g, back)) << text;
  EXPECT_EQ(print_graph(back), text);
  EXPECT_EQ(back.num_ops(), g.num_ops());
  return back;
}

void expect_same_info(const ModelInfo& a, const ModelInfo& b) {
  EXPECT_EQ(a.ir_version, b.ir_version);
  EXPECT_EQ(a.opset_imports, b.opset_imports);
  EXPECT_EQ(a.producer_name, b.producer_name);
  EXPECT_EQ(a.producer_version, b.producer_version);
  EXPECT_EQ(a.domain, b.domain);
  EXPECT_EQ(a.model_version, b.model_version);
  EXPECT_EQ(a.doc_string, b.doc_string);
  EXPECT_EQ(a.graph_name, b.graph_name);
  EXPECT_EQ(a.graph_doc_string, b.graph_doc_string);
  EXPECT_EQ(a.metadata_props, b.metadata_props);
  EXPECT_EQ(a.functions, b.functions);
}

// Expects parse_graph(text) to fail on `line` with a message containing `reason`.
void expect_error(const std::string& text, int line, const std::string& reason) {
  try {
    parse_graph(text);
    ADD_FAILURE() << "expected an error containing '" << reason << "' for:\n" << text;
  } catch (const Error& e) {
    std::string msg = e.what();
    std::string where = "line " + std::to_string(line) + ", column ";
    EXPECT_EQ(msg.rfind(where, 0), 0u) << msg;
    EXPECT_NE(msg.find(reason), std::string::npos) << msg;
  }
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Tensor random_bits(DType dt, std::vector<int64_t> dims, std::mt19937_64& rng) {
  std::string bytes(num_elements(dims) * dtype_size(dt), '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  if (dt == DType::Bool)
    for (char& c : bytes) c &= 1;
  return Tensor(dt, std::move(dims), std::move(bytes));
}

TEST(TextType, PrintsAndParsesEveryDtypeAndDim) {
  TensorType t{DType::Float32, {Dim(1), Dim(3), Dim::sym("N"), Dim::unknown()}};
  EXPECT_EQ(print_type(t), "f32[1,3,N,?]");
  EXPECT_EQ(parse_type("f32[1,3,N,?]"), t);
  TensorType odd{DType::Int64, {Dim::sym("batch size"), Dim::sym("?"), Dim::sym("3x"), Dim(0)}};
  EXPECT_EQ(print_type(odd), R"(i64["batch size","?","3x",0])");
  EXPECT_EQ(parse_type(print_type(odd)), odd);
  EXPECT_EQ(print_type({DType::Bool, {}}), "bool[]");
  for (int i = 0; i <= 16; ++i) {
    TensorType each{static_cast<DType>(i), {Dim(2), Dim::sym("S")}};
    EXPECT_EQ(parse_type(print_type(each)), each) << print_type(each);
  }
  EXPECT_THROW(parse_type("f33[2]"), Error);
  EXPECT_THROW(parse_type("f32[-1]"), Error);
  EXPECT_THROW(parse_type("f32[2] x"), Error);
}

TEST(TextRoundTrip, HandWrittenGraph) {
  Graph g = expect_canonical(R"(graph main(%x: f32[N,3,?], %y: f32[3]) {
  %w = const f32[3] {1, 2.5, -0}
  %0 = Add(%x, %w) : f32[N,3,3] @add1
  %1 = Mul(%0, %y) : f32[N,3,3]
  %lo = const f32[] {-1}
  %2 = Clip(%1, _, %lo) : f32[N,3,3]
  %z, %mask = Dropout(%2) : f32[N,3,3], bool[N,3,3]
  return %z, %mask as "m"
}
)");
  EXPECT_EQ(g.output_names(), (std::vector<std::string>{"z", "m"}));
  EXPECT_EQ(g.info().graph_name, "main");
  EXPECT_EQ(g.num_ops(), 4u);
  const Node& clip = *g.outputs()[0].node->inputs()[0].node;
  EXPECT_EQ(clip.op_type(), "Clip");
  ASSERT_EQ(clip.inputs().size(), 3u);
  EXPECT_FALSE(clip.inputs()[1].present());
  EXPECT_EQ(clip.inputs()[0].node->inputs()[0].node->name(), "add1");
}

TEST(TextRoundTrip, HandWrittenTextMayLeaveOutTypesAndComments) {
  Graph g = parse_graph(R"(
    # a comment line
    graph g(%x: f32[2,3]) {   # trailing comment
      %r = Relu(%x)
      %s = Add(%r,%x) : f32[2,3]
      return %s
    })");
  EXPECT_EQ(print_graph(g), R"(graph g(%x: f32[2,3]) {
  %r = Relu(%x) : f32[2,3]
  %s = Add(%r, %x) : f32[2,3]
  return %s
}
)");
}

TEST(TextRoundTrip, DefaultModelInfoPrintsNoHeader) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({2})});
  Graph g = b.finish({b.op1("Relu", {x})}, {"y"});
  EXPECT_EQ(print_graph(g), "graph isomer(%x: f32[2]) {\n  %0 = Relu(%x) : f32[2]\n  return %0 as \"y\"\n}\n");
  expect_round_trip(g);
}

// A graph built with the builder that uses every feature of the format.
Graph feature_graph() {
  GraphBuilder b(/*dedupe=*/false);
  Value x = b.input("x", {DType::Float32, {Dim::sym("N"), Dim(3), Dim::unknown()}});
  Value odd = b.input("input:0", {DType::Float32, {Dim::sym("batch size"), Dim(3), Dim(4)}});
  Value digits = b.input("123", {DType::Int64, make_shape({4})});
  Value w = b.constant(Tensor::from_f64(DType::Float32, {4}, std::vector<double>{1, -2.5, 1e-7, 0}), "w");
  Value w_again = b.constant(Tensor::from_f64(DType::Float32, {4}, std::vector<double>{3, 4, 5, 6}), "w");
  Value nameless = b.constant(Tensor::from_f64(DType::Float32, {}, std::vector<double>{0.5}));
  std::mt19937_64 rng(7);
  Value big = b.constant(random_bits(DType::Float32, {3, 4}, rng).reshaped({3, 4}), "onnx::Conv_big");

  Value cast = b.op1("Cast", {digits}, {{"to", int64_t{1}}}, "/model/Cast");
  Value sum = b.op1("Add", {odd, w}, {}, "add");
  Value prod = b.op1("Mul", {sum, cast}, {});
  Value sum2 = b.op1("Add", {prod, w_again}, {});
  Value sum3 = b.op1("Add", {sum2, big}, {});
  Value clipped = b.op1("Clip", {sum3, Value{}, nameless});
  // Every attribute kind, on an operator that ignores attributes.
  Attributes attrs{{"i", int64_t{-3}},
                   {"f", 0.1},
                   {"f32", static_cast<double>(0.1f)},
                   {"whole", 2.0},
                   {"neg_zero", -0.0},
                   {"inf", std::numeric_limits<double>::infinity()},
                   {"tiny", 5e-324},
                   {"s", std::string("quote \" backslash \\ newline \n byte \x01 utf8 \xc3\xa9")},
                   {"ints", std::vector<int64_t>{1, -2, 3}},
                   {"floats", std::vector<double>{1.0, 0.25, -1e300}},
                   {"strings", std::vector<std::string>{"a", "", "c d"}},
                   {"no_ints", std::vector<int64_t>{}},
                   {"no_floats", std::vector<double>{}},
                   {"no_strings", std::vector<std::string>{}},
                   {"t", Tensor::from_i64(DType::Int64, {2}, std::vector<int64_t>{7, -8})},
                   {"big_t", random_bits(DType::Float64, {20}, rng)},
                   {"weird name", int64_t{1}}};
  Value ident = b.op1("Identity", {clipped}, attrs);
  std::vector<Value> drop = b.op("Dropout", {ident}, {}, 2, "drop");
  // Two equal nodes stay apart (dedupe=false) and must round-trip as two.
  Value r1 = b.op1("Relu", {x});
  Value r2 = b.op1("Relu", {x});
  Value rr = b.op1("Add", {r1, r2});
  // Names of op outputs, including one taken by an input and one that is all digits.
  NodePtr named = Node::make_op(get_op("Neg"), {rr}, {}, 1, "neg node", {"x"});
  Value neg = b.intern(named)->output(0);
  NodePtr named2 = Node::make_op(get_op("Abs"), {neg}, {}, 1, "", {"42"});
  Value abs = b.intern(named2)->output(0);
  // Opaque nodes: binary proto, uid, omitted input, symbolic output types, onnx types.
  OpaqueInfo info;
  info.domain = "com.example";
  info.op_type = "Foo-Bar";
  info.node_proto = std::string("\x00\x01\x02\xff proto", 10);
  info.uid = 42;
  info.onnx_output_types = {std::nullopt, std::string("\x08\x01", 2)};
  std::vector<Value> opq = b.opaque(info, {abs, Value{}, drop[1]},
                                    {{DType::Float32, {Dim::unknown()}}, {DType::Int64, {Dim::sym("K")}}}, "foo",
                                    {"", "aux"});
  OpaqueInfo plain;
  plain.op_type = "Bar";
  Value opq2 = b.opaque(plain, {opq[0]}, {{DType::String, {}}})[0];

  ModelInfo mi;
  mi.ir_version = 7;
  mi.opset_imports = {{"", 13}, {"ai.onnx", 13}, {"com.microsoft", 1}, {"weird domain", 2}};
  mi.producer_name = "pytorch";
  mi.producer_version = "2.1.0";
  mi.domain = "ai.example";
  mi.model_version = 3;
  mi.doc_string = "doc\nwith \"quotes\"";
  mi.graph_name = "main graph";
  mi.graph_doc_string = "graph doc";
  mi.metadata_props = {{"author", "me"}, {"k", "v\x01"}};
  mi.functions = {std::string("\x0a\x03""foo", 5), ""};
  return b.finish({drop[0], opq[1], opq2, drop[0], x, w_again, abs}, {"out", "aux", "", "out2", "x_out", "w", "42"},
                  mi);
}

TEST(TextRoundTrip, BuilderGraphWithEveryFeature) {
  Graph g = feature_graph();
  Graph back = expect_round_trip(g);
  expect_same_info(g.info(), back.info());
  EXPECT_EQ(back.output_names(), g.output_names());
  // Names are cosmetic for same_graph, so check them node by node.
  std::vector<NodePtr> a = g.topo_order(), b = back.topo_order();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i]->name(), b[i]->name()) << i;
    std::vector<std::string> names = a[i]->output_names();
    if (std::all_of(names.begin(), names.end(), [](const std::string& n) { return n.empty(); })) names.clear();
    EXPECT_EQ(names, b[i]->output_names()) << i;
    EXPECT_EQ(a[i]->attrs(), b[i]->attrs()) << i;
    if (a[i]->opaque()) {
      EXPECT_EQ(a[i]->opaque()->domain, b[i]->opaque()->domain);
      EXPECT_EQ(a[i]->opaque()->op_type, b[i]->opaque()->op_type);
      EXPECT_EQ(a[i]->opaque()->node_proto, b[i]->opaque()->node_proto);
      EXPECT_EQ(a[i]->opaque()->uid, b[i]->opaque()->uid);
      EXPECT_EQ(a[i]->opaque()->onnx_output_types, b[i]->opaque()->onnx_output_types);
    }
  }
  // Attribute values that == cannot tell apart are checked bit by bit.
  const Node* ident = nullptr;
  for (const NodePtr& n : b)
    if (n->op_type() == "Identity") ident = n.get();
  ASSERT_NE(ident, nullptr);
  EXPECT_TRUE(std::signbit(ident->attrs().get_float("neg_zero")));
  EXPECT_EQ(ident->attrs().get_float("tiny"), 5e-324);
  EXPECT_EQ(ident->attrs().get_float("f32"), static_cast<double>(0.1f));
  EXPECT_EQ(ident->attrs().get_float("f"), 0.1);
}

TEST(TextRoundTrip, PrintIsDeterministic) {
  EXPECT_EQ(print_graph(feature_graph()), print_graph(feature_graph()));
}

TEST(TextRoundTrip, ConstantsOfEveryDtypeAreBitExact) {
  std::mt19937_64 rng(1);
  const DType all[] = {DType::Float32, DType::UInt8,  DType::Int8,   DType::UInt16, DType::Int16,
                       DType::Int32,   DType::Int64,  DType::String, DType::Bool,   DType::Float16,
                       DType::Float64, DType::UInt32, DType::UInt64, DType::Complex64, DType::Complex128,
                       DType::BFloat16};
  GraphBuilder b;
  std::vector<Value> outs;
  std::vector<std::string> names;
  for (DType dt : all) {
    for (int64_t n : {0, 1, 5, 16, 17, 100}) {
      Tensor t = dt == DType::String ? Tensor(dt, {n}, std::string("\x0a\x01z", 3))
                                     : random_bits(dt, {n}, rng);
      outs.push_back(b.constant(t));
      names.push_back(std::string(dtype_name(dt)) + std::to_string(n));
    }
  }
  Graph g = b.finish(outs, names);
  Graph back = expect_round_trip(g);
  for (size_t i = 0; i < outs.size(); ++i)
    EXPECT_TRUE(back.outputs()[i].constant()->same_as(*g.outputs()[i].constant())) << names[i];
}

TEST(TextRoundTrip, SpecialFloatsInlineWhereExactElseHex) {
  auto f32 = [](uint32_t bits) { return std::bit_cast<float>(bits); };
  std::vector<float> special = {INFINITY, -INFINITY, -0.0f, 0.0f, 1e-45f, 3.4028235e38f, 0.1f, f32(0x7fc00000)};
  std::string bytes(special.size() * 4, '\0');
  std::memcpy(bytes.data(), special.data(), bytes.size());
  GraphBuilder b;
  Value inl = b.constant(Tensor(DType::Float32, {8}, bytes), "special");
  float payload_nan = f32(0x7fa00001);
  Value hex = b.constant(Tensor(DType::Float32, {1}, std::string(reinterpret_cast<char*>(&payload_nan), 4)), "nan");
  uint16_t half_bits[] = {0x8000, 0x7c00, 0xfc00, 0x0001, 0x3555, 0x7bff};
  Value half = b.constant(Tensor(DType::Float16, {6}, std::string(reinterpret_cast<char*>(half_bits), 12)), "h");
  Value bf = b.constant(Tensor(DType::BFloat16, {6}, std::string(reinterpret_cast<char*>(half_bits), 12)), "bf");
  uint8_t bool_bytes[] = {1, 0, 2};
  Value odd_bool = b.constant(Tensor(DType::Bool, {3}, std::string(reinterpret_cast<char*>(bool_bytes), 3)), "b");
  Graph g = b.finish({inl, hex, half, bf, odd_bool}, {"special", "nan", "h", "bf", "b"});
  std::string text = print_graph(g);
  EXPECT_NE(text.find("%special = const f32[8] {inf, -inf, -0, 0, 1e-45, 3.4028235e+38, 0.1, nan}"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("%nan = const f32[1] hex\"0100a07f\""), std::string::npos) << text;
  EXPECT_NE(text.find("%h = const f16[6] {-0, inf, -inf, 5.9604645e-08, 0.33325195, 65504}"), std::string::npos) << text;
  EXPECT_NE(text.find("%b = const bool[3] hex\"010002\""), std::string::npos) << text;
  expect_round_trip(g);
}

TEST(TextRoundTrip, IntegerLimitsInline) {
  GraphBuilder b;
  std::string i64s(16, '\0'), u64s(8, '\0');
  int64_t lim[] = {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
  uint64_t umax = std::numeric_limits<uint64_t>::max();
  std::memcpy(i64s.data(), lim, 16);
  std::memcpy(u64s.data(), &umax, 8);
  Graph g = b.finish({b.constant(Tensor(DType::Int64, {2}, i64s)), b.constant(Tensor(DType::UInt64, {1}, u64s))},
                     {"a", "b"});
  std::string text = print_graph(g);
  EXPECT_NE(text.find("{-9223372036854775808, 9223372036854775807}"), std::string::npos) << text;
  EXPECT_NE(text.find("{18446744073709551615}"), std::string::npos) << text;
  expect_round_trip(g);
}

TEST(TextGolden, FilesPrintBackByteForByte) {
  std::filesystem::path dir = std::filesystem::path(ISOMER_SOURCE_DIR) / "tests" / "golden" / "text";
  size_t count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".txt") continue;
    SCOPED_TRACE(entry.path().filename().string());
    expect_canonical(read_file(entry.path()));
    ++count;
  }
  EXPECT_GE(count, 3u);
}

TEST(TextGolden, ModelInfoFileHasEveryField) {
  std::filesystem::path file =
      std::filesystem::path(ISOMER_SOURCE_DIR) / "tests" / "golden" / "text" / "model_info.txt";
  Graph g = parse_graph(read_file(file));
  const ModelInfo& mi = g.info();
  EXPECT_EQ(mi.ir_version, 7);
  EXPECT_EQ(mi.opset_imports, (std::vector<std::pair<std::string, int64_t>>{{"", 13}, {"com.microsoft", 1}}));
  EXPECT_EQ(mi.producer_name, "pytorch");
  EXPECT_EQ(mi.doc_string, "first line\nsecond \"line\"");
  EXPECT_EQ(mi.graph_name, "my graph");
  EXPECT_EQ(mi.metadata_props.size(), 2u);
  EXPECT_EQ(mi.functions, std::vector<std::string>{"\x0a\x03""foo"});
  EXPECT_EQ(g.inputs()[0]->name(), "input:0");
  EXPECT_EQ(g.inputs()[1]->name(), "123");
}

TEST(TextRoundTrip, NoOpsetsAndEmptyNames) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1})});
  ModelInfo mi;
  mi.opset_imports.clear();
  mi.graph_name = "";
  Graph g = b.finish({x}, {""}, mi);
  EXPECT_EQ(print_graph(g), "opset none\ngraph \"\"(%x: f32[1]) {\n  return %x as \"\"\n}\n");
  Graph back = expect_round_trip(g);
  EXPECT_TRUE(back.info().opset_imports.empty());
}

TEST(TextErrors, ReportLineAndReason) {
  const std::string head = "graph g(%x: f32[2,3], %y: f32[4,3]) {\n";
  expect_error(head + "  %0 = Frob(%x)\n  return %0\n}\n", 2, "unknown operator 'Frob'");
  expect_error(head + "  %0 = Relu(%z)\n  return %0\n}\n", 2, "unknown value %z");
  expect_error(head + "  %0 = Relu(%x)\n  %1 = Add(%0)\n  return %1\n}\n", 3, "has 1 inputs, expected 2");
  expect_error(head + "  %0 = Add(%x, %y)\n  return %0\n}\n", 2, "cannot broadcast");
  expect_error("graph g(%x: f33[2]) {\n  return %x\n}\n", 1, "unknown element type 'f33'");
  expect_error(head + "  %0 = Identity(%x) {s=\"abc}\n  return %0\n}\n", 2, "unterminated string");
  expect_error(head + "  %0 = Relu(%x)\n  %0 = Relu(%x)\n  return %0\n}\n", 3, "%0 is already defined on line 2");
  expect_error(head + "  %x = Relu(%y)\n  return %x\n}\n", 2, "%x is already defined on line 1");
  expect_error(head + "  %0 = Relu(%x) : f32[2,4]\n  return %0\n}\n", 2,
               "the text says output 0 of Relu is f32[2,4] but its inferred type is f32[2,3]");
  expect_error(head + "  %0, %1 = Relu(%x)\n  return %0\n}\n", 2, "produces 1 outputs, 2 requested");
  expect_error(head + "  %c = const f32[3] {1, 2}\n  return %c\n}\n", 2, "f32[3] needs 3 values, found 2");
  expect_error(head + "  %c = const u8[2] {1, 256}\n  return %c\n}\n", 2, "'256' is not a valid u8 value");
  expect_error(head + "  %c = const f32[2] hex\"abc\"\n  return %c\n}\n", 2, "bad hex data");
  expect_error(head + "  %c = const f32[2] hex\"0000\"\n  return %c\n}\n", 2, "does not match f32[2]");
  expect_error(head + "  %c = const f32[N] {1}\n  return %c\n}\n", 2, "static shape");
  expect_error(head + "  %0 = Relu(%x)\n", 3, "missing 'return'");
  expect_error(head + "  return _\n}\n", 2, "a graph output cannot be omitted");
  expect_error(head + "  return %x\n}\nextra\n", 4, "after the graph");
  expect_error(head + "  %0 = Identity(%x) {s=\"a\\q\"}\n  return %0\n}\n", 2, "unknown escape '\\q'");
  expect_error(head + "  %0 = Identity(%x) {a=[]}\n  return %0\n}\n", 2, "empty list needs its kind");
  expect_error(head + "  %0 = Identity(%x) {a=[1, \"s\"]}\n  return %0\n}\n", 2, "does not fit a list of ints");
  expect_error(head + "  %0 = Identity(%x) {a=1, a=2}\n  return %0\n}\n", 2, "duplicate attribute 'a'");
  expect_error(head + "  %0 = opaque \"d\"::Foo(%x)\n  return %0\n}\n", 2, "needs its output types");
  expect_error(head + "  %0 = Relu(%x) : f32[2,3], f32[2,3]\n  return %0\n}\n", 2, "2 types for 1 values");
  expect_error(head + "  %0 = Relu(%x) $\n  return %0\n}\n", 2, "unexpected character '$'");
  expect_error("opset\ngraph g() {\n  return\n}\n", 2, "expected an opset version");
  expect_error("ir_versoin 7\ngraph g() {\n  return\n}\n", 1, "unknown header line 'ir_versoin'");
}

TEST(TextErrors, DamagedTextsFailCleanly) {
  // Every prefix and many single-byte corruptions of a golden text either parse or
  // throw Error; none may crash.
  std::string text = read_file(std::filesystem::path(ISOMER_SOURCE_DIR) / "tests" / "golden" / "text" / "opaque.txt");
  size_t failures = 0;
  auto attempt = [&](const std::string& t) {
    try {
      parse_graph(t);
    } catch (const Error&) {
      ++failures;
    }
  };
  for (size_t n = 0; n < text.size(); ++n) attempt(text.substr(0, n));
  EXPECT_EQ(failures, text.size() - 1);  // only the prefix without the final newline is a whole graph
  std::mt19937 rng(3);
  const char replacements[] = {'\0', '"', '%', '(', ')', ',', ':', '_', 'x', '9', '-', '\n', '#', '['};
  for (int i = 0; i < 2000; ++i) {
    std::string t = text;
    t[rng() % t.size()] = replacements[rng() % sizeof replacements];
    attempt(t);
  }
}

TEST(TextErrors, ColumnPointsAtTheProblem) {
  try {
    parse_graph("graph g(%x: f32[2]) {\n  %0 = Add(%x, %nope)\n  return %0\n}\n");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "line 2, column 16: unknown value %nope");
  }
}

}  // namespace
}  // namespace isomer
