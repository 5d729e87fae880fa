{%- extends 'manage_students_base.tpl' -%}
{%- block page_head -%}
<script src="{{ base_url }}/formgrader/static/js/manage_students.js"></script>
{%- endblock -%}
{%- block breadcrumbs -%}
<ol class="breadcrumb">
  <li class="active">学生</li>
</ol>
{%- endblock -%}
{%- block table_header -%}
<tr>
  <th>姓名</th>
  <th class="text-center">学号</th>
  <th class="text-center">邮箱</th>
  <th class="text-center">状态</th>
  <th class="text-center">总分</th>
  <th class="text-center no-sort">修改</th>
</tr>
{%- endblock -%}
{%- block table_body -%}
<tr><td colspan="6">正在载入……</td></tr>
{%- endblock -%}
{%- block table_footer -%}
<tr>
  <td colspan="6">
    <span class="glyphicon glyphicon-plus" aria-hidden="true"></span>
    <a href="#" onClick="createStudentModal();">添加学生……</a>
  </td>
</tr>
{%- endblock -%}
