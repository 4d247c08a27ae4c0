// The operator table, as an X-macro: ISOMER_OP(Name) for each operator isomer
// understands natively. Each entry is defined by a function `OpDef def_<Name>()`
// in the ops/ file of its family; registry.cpp builds the table from this list, and
// a test checks every entry has the hooks the rest of isomer needs.
//
// To add an operator: add a line here and its def_<Name>() beside its relatives.

// unary.cpp: elementwise functions of one tensor
ISOMER_OP(Relu)
ISOMER_OP(LeakyRelu)
ISOMER_OP(Sigmoid)
ISOMER_OP(HardSigmoid)
ISOMER_OP(HardSwish)
ISOMER_OP(Tanh)
ISOMER_OP(Erf)
ISOMER_OP(Gelu)
ISOMER_OP(Exp)
ISOMER_OP(Log)
ISOMER_OP(Sqrt)
ISOMER_OP(Reciprocal)
ISOMER_OP(Neg)
ISOMER_OP(Abs)
ISOMER_OP(Clip)
ISOMER_OP(Identity)
ISOMER_OP(Dropout)
ISOMER_OP(Cast)
// binary.cpp: elementwise functions of several tensors, with broadcasting
ISOMER_OP(Add)
ISOMER_OP(Sub)
ISOMER_OP(Mul)
ISOMER_OP(Div)
ISOMER_OP(Pow)
ISOMER_OP(Max)
ISOMER_OP(Min)
ISOMER_OP(Equal)
ISOMER_OP(Where)
// linear.cpp: contractions
ISOMER_OP(MatMul)
ISOMER_OP(Gemm)
ISOMER_OP(Conv)
// pool.cpp
ISOMER_OP(MaxPool)
ISOMER_OP(AveragePool)
ISOMER_OP(GlobalAveragePool)
// normalization.cpp
ISOMER_OP(BatchNormalization)
ISOMER_OP(LayerNormalization)
ISOMER_OP(Softmax)
// reduce.cpp
ISOMER_OP(ReduceMean)
ISOMER_OP(ReduceSum)
// layout.cpp: operators that move data without computing
ISOMER_OP(Concat)
ISOMER_OP(Split)
ISOMER_OP(Transpose)
ISOMER_OP(Reshape)
ISOMER_OP(Flatten)
ISOMER_OP(Squeeze)
ISOMER_OP(Unsqueeze)
ISOMER_OP(Slice)
ISOMER_OP(Gather)
ISOMER_OP(Pad)
ISOMER_OP(Expand)
// shape.cpp: operators on shapes
ISOMER_OP(Shape)
ISOMER_OP(ConstantOfShape)
// mugraph.cpp: a fused region found by the μGraph search (src/mugraph)
ISOMER_OP(MuGraph)
// parallel.cpp: parallel operators (devices simulated as a leading dimension; domain isomer.parallel)
ISOMER_OP(Partition)
ISOMER_OP(Combine)
ISOMER_OP(Replicate)
ISOMER_OP(Reduce)
ISOMER_OP(AllReduce)
ISOMER_OP(AllGather)
ISOMER_OP(ReduceScatter)
