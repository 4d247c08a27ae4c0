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
// TODO-enable ISOMER_OP(MatMul)
// TODO-enable ISOMER_OP(Gemm)
// TODO-enable ISOMER_OP(Conv)
// pool.cpp
// TODO-enable ISOMER_OP(MaxPool)
// TODO-enable ISOMER_OP(AveragePool)
// TODO-enable ISOMER_OP(GlobalAveragePool)
// normalization.cpp
// TODO-enable ISOMER_OP(BatchNormalization)
// TODO-enable ISOMER_OP(LayerNormalization)
// TODO-enable ISOMER_OP(Softmax)
// reduce.cpp
// TODO-enable ISOMER_OP(ReduceMean)
// TODO-enable ISOMER_OP(ReduceSum)
// layout.cpp: operators that move data without computing
// TODO-enable ISOMER_OP(Concat)
// TODO-enable ISOMER_OP(Split)
// TODO-enable ISOMER_OP(Transpose)
// TODO-enable ISOMER_OP(Reshape)
// TODO-enable ISOMER_OP(Flatten)
// TODO-enable ISOMER_OP(Squeeze)
// TODO-enable ISOMER_OP(Unsqueeze)
// TODO-enable ISOMER_OP(Slice)
// TODO-enable ISOMER_OP(Gather)
// TODO-enable ISOMER_OP(Pad)
// TODO-enable ISOMER_OP(Expand)
// shape.cpp: operators on shapes
// TODO-enable ISOMER_OP(Shape)
// TODO-enable ISOMER_OP(ConstantOfShape)
