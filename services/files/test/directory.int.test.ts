import { filesSuite } from "./suite.js";

filesSuite("directory");
