#!/usr/bin/env bash
# Encodes frozen_tf.pbtxt into frozen_tf.pb (and dynamic_tf.pbtxt into dynamic_tf.pb) with protoc (Debian's protobuf-compiler),
# against tensorflow_graph.proto: GraphDef bytes made without weft. The test checks that
# the committed .pb is what protoc makes of the .pbtxt, when protoc is installed.
set -euo pipefail
cd "$(dirname "$0")"
protoc --encode=tensorflow.GraphDef tensorflow_graph.proto < frozen_tf.pbtxt > frozen_tf.pb
protoc --encode=tensorflow.GraphDef tensorflow_graph.proto < dynamic_tf.pbtxt > dynamic_tf.pb
